// Blocks a job's status or manifest may carry (each added by its own feature): rendered when
// present, generically enough that a new field shows without a change here.
import { el, number } from "./dom.js";

export const EXTRA_BLOCKS = [
  ["reuse", "Reuse"], ["report", "Data report"], ["sinks", "Sinks"], ["webhook", "Webhook"], ["engine", "Engine"],
];

function scalar(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return number(value);
  if (typeof value === "object") return el("pre", {}, JSON.stringify(value, null, 2));
  return String(value);
}

export function facts(object) {
  return el("dl", { class: "facts" },
    Object.entries(object).flatMap(([name, value]) => [el("dt", {}, name.replaceAll("_", " ")), el("dd", {}, scalar(value))]));
}

// A list of objects (the sinks) as a table of their union of fields; anything else as facts.
function table(rows, label) {
  const columns = [...new Set(rows.flatMap((item) => Object.keys(item)))];
  return el("table", { class: "cards", "aria-label": label },
    el("thead", {}, el("tr", {}, columns.map((name) => el("th", { scope: "col" }, name.replaceAll("_", " "))))),
    el("tbody", {}, rows.map((item) => el("tr", { "data-name": item.name },
      columns.map((name) => el("td", { "data-label": name.replaceAll("_", " "), class: name === "error" && item.error ? "error" : null },
        scalar(item[name])))))));
}

export function extraBlocks(...sources) {
  return EXTRA_BLOCKS.map(([field, title]) => {
    const value = sources.map((source) => source && source[field]).find((found) => found !== undefined && found !== null);
    if (value === undefined) return null;
    let body;
    if (Array.isArray(value)) body = value.length && typeof value[0] === "object" ? table(value, title) : scalar(value);
    else if (typeof value === "object") body = facts(value);
    else body = scalar(value);
    return el("section", { class: "card", id: `block-${field}` }, el("h3", {}, title), body);
  });
}

// The spec as options to read: long texts cut, long lists of inline documents shortened.
export function readableSpec(spec) {
  return JSON.stringify(spec, (key, value) => {
    if (typeof value === "string" && value.length > 160) return `${value.slice(0, 160)}… (${number(value.length)} characters)`;
    if (Array.isArray(value) && value.length > 5) return [...value.slice(0, 5), `… and ${number(value.length - 5)} more`];
    return value;
  }, 2);
}
