// An admin key's schedules (scheduled incremental reindex).
import { el, when } from "./dom.js";

export function scheduleList(list) {
  const columns = ["Schedule", "Cron (UTC)", "Input", "Model", "Enabled", "Created"];
  if (!list.schedules.length) return el("section", {}, el("h2", {}, "Schedules"), el("p", { class: "muted" }, "No schedules."));
  return el("section", {},
    el("h2", {}, "Schedules"),
    el("table", { class: "cards", id: "schedules" },
      el("thead", {}, el("tr", {}, columns.map((name) => el("th", { scope: "col" }, name)))),
      el("tbody", {}, list.schedules.map((schedule) => el("tr", { "data-schedule-id": schedule.id },
        el("td", { "data-label": "Schedule" }, el("code", {}, schedule.id)),
        el("td", { "data-label": "Cron (UTC)" }, el("code", {}, schedule.cron)),
        el("td", { "data-label": "Input" }, el("code", {}, schedule.input.uri)),
        el("td", { "data-label": "Model" }, schedule.template.model || "default"),
        el("td", { "data-label": "Enabled" }, schedule.enabled ? "yes" : "no (runs when triggered)"),
        el("td", { "data-label": "Created" }, when(schedule.created_at)))))),
  );
}
