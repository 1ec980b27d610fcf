// The tenant's jobs, newest first: one row each, with what a watcher wants at a glance.
import { sparkline } from "./charts.js";
import { TERMINAL, badge, counts, duration, el, errorsByCode, number, progressBar, rate, tokensDone, when } from "./dom.js";

const COLUMNS = ["Job", "Status", "Progress", "Tokens", "Tokens/s", "ETA", "Records", "Errors by code"];

function cell(label, content, extra = {}) {
  return el("td", { "data-label": label, ...extra }, content);
}

// lines: job id -> its tokens/s between this tab's polls (throughput.js): a small line for each job
// the tab has watched running, kept after it ends; none for a job never seen running.
function row(job, lines) {
  // an id per link: the list is redrawn as it updates, and the focus comes back to the same link
  const link = el("a", { href: `#/jobs/${job.id}`, class: "job-link", id: `link-${job.id}`, "aria-label": `job ${job.id}` },
    el("code", {}, job.id.slice(0, 12)));
  return el("tr", { "data-job-id": job.id, "data-status": job.status },
    cell("Job", [link, el("div", { class: "muted" }, `${job.task} · ${job.model}`), el("div", { class: "muted" }, when(job.created_at))]),
    cell("Status", badge(job.status), { class: "status" }),
    cell("Progress", progressBar(job, `progress-${job.id}`)),
    cell("Tokens", number(tokensDone(job)), { class: "num tokens-done", "data-tokens": tokensDone(job) }),
    cell("Tokens/s", [rate(job.rates.tokens_per_s),
      sparkline(lines[job.id], { what: "tokens per second", format: rate, width: 96, height: 24, className: "sparkline small" })],
    { class: "num" }),
    cell("ETA", TERMINAL.has(job.status) ? "–" : duration(job.rates.eta_s), { class: "num" }),
    cell("Records", counts(job)),
    cell("Errors by code", errorsByCode(job.errors_by_code)),
  );
}

// Links to the newest page and to the next older one (the API's next_before), keeping the page size.
function pager(list, page) {
  const size = page.limit === 50 ? "" : `limit=${page.limit}`;
  const newest = page.before && el("a", { href: `#/${size ? `?${size}` : ""}`, id: "newest-jobs" }, "Newest jobs");
  const older = list.next_before &&
    el("a", { href: `#/?before=${list.next_before}${size ? `&${size}` : ""}`, id: "older-jobs" }, "Older jobs");
  return newest || older ? el("nav", { class: "pager", "aria-label": "Pages of jobs" }, newest, older) : null;
}

export function jobList(list, page = { limit: 50, before: null }, lines = {}) {
  if (!list.jobs.length) {
    const none = page.before ? "No older jobs." : "No jobs yet for this key's tenant.";
    return el("section", {}, el("h2", {}, "Jobs"), el("p", { class: "muted" }, none), pager(list, page));
  }
  const which = page.before ? `${list.jobs.length} older jobs` : `The ${list.jobs.length} most recent`;
  return el("section", {},
    el("h2", {}, "Jobs"),
    el("p", { class: "muted" }, `${which}, updating live.`),
    el("table", { class: "cards", id: "jobs", "aria-label": "Jobs" },
      el("thead", {}, el("tr", {}, COLUMNS.map((name) => el("th", { scope: "col", class: /Tokens|ETA/.test(name) ? "num" : null }, name)))),
      el("tbody", {}, list.jobs.map((job) => row(job, lines))),
    ),
    pager(list, page),
  );
}
