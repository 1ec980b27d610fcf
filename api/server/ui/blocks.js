// Blocks a job's status or manifest may carry (each added by its own feature): rendered when
// present, generically enough that a new field shows without a change here.
import { bars } from "./charts.js";
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

// What the data report's histograms count (the manifest's report: jobs/report/data_report.py).
const COUNTED = { document_tokens: ["documents by length in tokens", " documents"], chunk_tokens: ["chunk rows by length in tokens", " rows"] };

// A histogram ({edges, counts}, the last bucket open) as bars from its first non-empty bucket to its
// last, labelled like `poolq results JOB --report` labels them: 16-31, ..., 65536+.
function histogram(name, { edges, counts }) {
  const filled = counts.flatMap((count, index) => (count ? [index] : []));
  if (!filled.length) return "none";
  const shown = counts.map((_, index) => index).slice(filled[0], filled.at(-1) + 1);
  const labels = shown.map((index) => (index + 1 < edges.length ? `${edges[index]}-${edges[index + 1] - 1}` : `${edges[index]}+`));
  const [title, unit] = COUNTED[name] || [`${name.replaceAll("_", " ")} by range`, ""];
  return bars(labels, shown.map((index) => counts[index]), { title, unit });
}

const isHistogram = (value) => Boolean(value) && Array.isArray(value.edges) && Array.isArray(value.counts);

export function facts(object) {
  return el("dl", { class: "facts" }, Object.entries(object).flatMap(([name, value]) => [
    el("dt", {}, name.replaceAll("_", " ")), el("dd", { id: isHistogram(value) ? `histogram-${name}` : null },
      isHistogram(value) ? histogram(name, value) : scalar(value))]));
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
