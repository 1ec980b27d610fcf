// The models this deployment serves (GET /v1/models): what a job may name, and which the live
// compute workers hold loaded now, with the memory they take there.
import { bytes, el, number } from "./dom.js";

const COLUMNS = ["Model", "Tasks", "Dimensions", "Window", "Loaded on", "Resident memory", "Loads / evictions"];
const NUMERIC = new Set(["Dimensions", "Window", "Resident memory", "Loads / evictions"]);

function cell(label, content) {
  return el("td", { "data-label": label, class: NUMERIC.has(label) ? "num" : null }, content);
}

function row(model) {
  const workers = model.loaded_workers === 1 ? "1 worker" : `${number(model.loaded_workers)} workers`;
  return el("tr", { "data-model-id": model.id, "data-loaded-workers": model.loaded_workers },
    cell("Model", [el("code", {}, model.id), el("div", { class: "muted" }, `${model.pooling} pooling · ${model.owned_by}`)]),
    cell("Tasks", model.tasks.join(", ")),
    cell("Dimensions", number(model.dimensions)),
    cell("Window", `${number(model.window)} tokens`),
    cell("Loaded on", model.loaded ? workers : el("span", { class: "muted" }, "not loaded")),
    cell("Resident memory", model.resident_bytes ? bytes(model.resident_bytes) : "–"),
    cell("Loads / evictions", `${number(model.loads)} / ${number(model.evictions)}`),
  );
}

export function modelList(list) {
  if (!list.data.length) return el("section", {}, el("h2", {}, "Models"), el("p", { class: "muted" }, "No models served."));
  return el("section", {},
    el("h2", {}, "Models"),
    el("p", { class: "muted" }, "What jobs may name here; loads and memory are the live compute workers', each counted since it started."),
    el("table", { class: "cards", id: "models", "aria-label": "Models" },
      el("thead", {}, el("tr", {}, COLUMNS.map((name) => el("th", { scope: "col", class: NUMERIC.has(name) ? "num" : null }, name)))),
      el("tbody", {}, list.data.map(row)),
    ),
  );
}
