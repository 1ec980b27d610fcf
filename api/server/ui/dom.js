// Building the page from data without ever parsing it as HTML (text goes in as text), and the
// formats the views share.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const TERMINAL = new Set(["succeeded", "partially_succeeded", "failed", "cancelled"]);

export function number(value) {
  return value === null || value === undefined ? "–" : Number(value).toLocaleString("en-US");
}

export function rate(value) {
  if (value === null || value === undefined) return "–";
  return value >= 100 ? Math.round(value).toLocaleString("en-US") : value.toFixed(1);
}

// Bytes in binary units (memory): 87.4 MiB.
export function bytes(value) {
  if (value === null || value === undefined) return "–";
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let size = Number(value);
  let unit = 0;
  while (size >= 1024 && unit < units.length - 1) {
    size /= 1024;
    unit += 1;
  }
  return unit ? `${size.toFixed(1)} ${units[unit]}` : `${number(size)} bytes`;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

export function when(iso) {
  if (!iso) return "–";
  const date = new Date(iso);
  return `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

export function tokensDone(job) {
  return job.usage.tokens + job.in_progress.tokens;
}

// The share done: tokens against the job's estimated tokens where known, else records embedded or
// failed against its total (a cancelled job's records not processed are not done); null while
// unknown (an indeterminate bar).
export function fractionDone(job) {
  if (job.status === "succeeded") return 1;
  const estimate = job.estimate && job.estimate.tokens;
  if (estimate) return Math.min(1, tokensDone(job) / estimate);
  const total = job.counts.total;
  if (total) return Math.min(1, (job.counts.completed + job.counts.failed) / total);
  return TERMINAL.has(job.status) ? 1 : null;
}

export function progressBar(job, labelId) {
  const fraction = fractionDone(job);
  const bar = el("progress", { max: 100, "aria-labelledby": labelId });
  if (fraction !== null) bar.value = Math.round(fraction * 1000) / 10;
  const label = fraction === null ? "not planned yet" : `${(fraction * 100).toFixed(1)} %`;
  return el("div", { class: "progress" }, bar, el("span", { class: "progress-label", id: labelId }, label));
}

export function badge(state) {
  return el("span", { class: `badge ${state}` }, state.replace("_", " "));
}

export function counts(job) {
  const c = job.counts;
  const parts = [`${number(c.completed)} done`, `${number(c.failed)} failed`];
  if (c.not_processed) parts.push(`${number(c.not_processed)} not processed`);
  return `${parts.join(", ")} of ${number(c.total)}`;
}

export function errorsByCode(byCode) {
  const entries = Object.entries(byCode || {});
  if (!entries.length) return el("span", { class: "muted" }, "none");
  return el("ul", { class: "plain" }, entries.map(([code, count]) => el("li", {}, el("code", {}, code), `: ${number(count)}`)));
}
