// One job: its progress (live), options, errors with samples per code, results with download
// links, the blocks other features add (sinks, report, ...), and a cancel button while it runs.
import { extraBlocks, facts, readableSpec } from "./blocks.js";
import { bars, sparkline } from "./charts.js";
import { TERMINAL, badge, counts, duration, el, errorsByCode, number, progressBar, rate, tokensDone, when } from "./dom.js";

// Tokens/s between this page's polls while the job runs (kept after it ends; none for a job this tab
// never watched running).
function throughputLine(job, points) {
  const line = sparkline(points, { what: "tokens per second", format: rate });
  if (!line && TERMINAL.has(job.status)) return null;
  return el("figure", { class: "chart", id: "throughput" },
    el("figcaption", { class: "muted" }, "Tokens/s over time, as this page saw it"),
    line || el("p", { class: "muted" }, "Drawn after a few updates."));
}

// Where a waiting or running job stands in fair share (docs/http-api.md#place); none once it ended.
export function placeLine(job) {
  const place = job.queue;
  if (!place) return null;
  const ahead = `${place.jobs_ahead} job${place.jobs_ahead === 1 ? "" : "s"} ahead`;
  return el("p", { id: "job-place" }, `${ahead} · your share ${Math.round(place.tenant_share * 100)} % · ETA ${duration(place.eta_s)}`);
}

function progress(job, points) {
  return el("section", { class: "card", id: "progress" },
    el("h3", {}, "Progress"),
    progressBar(job, "job-progress"),
    placeLine(job),
    el("dl", { class: "facts" },
      el("dt", {}, "records"), el("dd", {}, counts(job)),
      el("dt", {}, "tokens"), el("dd", { id: "job-tokens", "data-tokens": tokensDone(job) },
        `${number(tokensDone(job))} of about ${number(job.estimate.tokens)}`),
      el("dt", {}, "tokens/s"), el("dd", {}, rate(job.rates.tokens_per_s)),
      el("dt", {}, "documents/s"), el("dd", {}, rate(job.rates.documents_per_s)),
      el("dt", {}, "ETA"), el("dd", {}, TERMINAL.has(job.status) ? "–" : duration(job.rates.eta_s)),
      el("dt", {}, "created"), el("dd", {}, when(job.created_at)),
      el("dt", {}, "started"), el("dd", {}, when(job.started_at)),
      el("dt", {}, "finished"), el("dd", {}, when(job.finished_at)),
    ),
    throughputLine(job, points),
    job.error ? el("p", { class: "error" }, job.error) : null,
  );
}

function sampleList(items) {
  return el("ul", { class: "plain" }, items.map((sample) => el("li", {},
    sample.id !== null && sample.id !== undefined ? [el("code", {}, String(sample.id)), ": "] : null,
    sample.message)));
}

function errors(job, samples) {
  const codes = Object.keys(job.errors_by_code || {});
  if (!codes.length) return el("section", { class: "card", id: "errors" }, el("h3", {}, "Errors"), el("p", { class: "muted" }, "No failed records."));
  const perCode = samples
    ? codes.map((code) => [el("h4", {}, el("code", {}, code), ` · ${number(job.errors_by_code[code])}`), sampleList(samples.samples[code] || [])])
    : [errorsByCode(job.errors_by_code), el("p", { class: "muted" }, "First messages (samples per code come when the job ends):"),
      sampleList(job.error_samples.map((message) => ({ message })))];
  const ranked = [...codes].sort((a, b) => job.errors_by_code[b] - job.errors_by_code[a] || a.localeCompare(b));
  const chart = bars(ranked, ranked.map((code) => job.errors_by_code[code]),
    { title: "failed records by error code", unit: " records", className: "bars bad" });
  return el("section", { class: "card", id: "errors" }, el("h3", {}, "Errors by code"), chart, perCode);
}

function results(outcome) {
  if (!outcome) return null;
  return el("section", { class: "card", id: "results" },
    el("h3", {}, "Results"),
    el("p", { class: "muted" }, `Download links are valid for ${duration(outcome.url_expires_in_s)} from when this page loaded them.`),
    el("table", { class: "cards" },
      el("thead", {}, el("tr", {}, ["Part", "Rows", "Download"].map((name) => el("th", { scope: "col" }, name)))),
      el("tbody", {}, outcome.parts.map((part) => el("tr", {},
        el("td", { "data-label": "Part" }, el("code", {}, part.key)),
        el("td", { "data-label": "Rows", class: "num" }, number(part.rows)),
        el("td", { "data-label": "Download" }, el("a", { href: part.url, download: "" }, "Parquet")))))),
    el("p", {}, el("a", { href: outcome.errors.url, download: "" }, "Error file"), ` (${number(outcome.errors.count)} lines, JSONL)`),
    facts({ manifest: outcome.manifest_uri, dimensions: outcome.dimensions, columns: outcome.columns.join(", ") }),
  );
}

function options(spec) {
  if (!spec) return null;
  return el("section", { class: "card", id: "options" }, el("h3", {}, "Options"), el("pre", { tabindex: 0, id: "options-spec", "aria-label": "job spec" }, readableSpec(spec)));
}

export function jobPage(view, onCancel) {
  const job = view.status;
  const cancellable = !TERMINAL.has(job.status) && job.status !== "cancelling";
  const manifest = view.results && view.results.manifest;
  return el("article", { "data-job-id": job.id, "data-status": job.status },
    el("p", {}, el("a", { href: "#/" }, "← All jobs")),
    el("div", { class: "heading-row" },
      el("h2", {}, "Job ", el("code", {}, job.id)),
      badge(job.status),
      cancellable ? el("button", { type: "button", class: "danger", id: "cancel-job", onclick: onCancel }, "Cancel job") : null),
    el("p", { class: "muted" }, `${job.task} · ${job.model} · tenant ${job.tenant}`),
    progress(job, view.throughput),
    errors(job, view.samples),
    results(view.results),
    extraBlocks(job, manifest),
    options(view.spec),
  );
}
