// The dashboard's entry: the key form, the views by URL fragment (#/, #/jobs/ID, #/models, #/schedules),
// and live updates by polling the JSON routes while the tab is visible.
import { ApiError, api, forgetKey, keepKey, storedKey } from "./api.js";
import { TERMINAL } from "./dom.js";
import { jobList } from "./job_list.js";
import { jobPage } from "./job_page.js";
import { modelList } from "./models.js";
import { scheduleList } from "./schedules.js";
import { record, tokensPerSecond } from "./throughput.js";

const POLL_MS = 2000;
const $ = (id) => document.getElementById(id);
let generation = 0; // bumped on every route change: a stale poll renders nothing
let timer = null;
let shown = ""; // what the view shows now, as JSON: unchanged data leaves the DOM (and focus) alone
const details = new Map(); // job id -> {spec, results, samples}: read once

function say(text, isError = false) {
  $("message").textContent = text;
  $("message").classList.toggle("error", isError);
}

function show(node, data) {
  const json = JSON.stringify(data);
  if (json === shown) return;
  shown = json;
  const focused = document.activeElement && document.activeElement.id;
  $("view").replaceChildren(node);
  if (focused && $(focused)) $(focused).focus();
}

function askForKey(message = "") {
  generation += 1;
  clearTimeout(timer);
  $("nav").hidden = true;
  $("view").replaceChildren();
  shown = "";
  $("key-form").hidden = false;
  $("key-error").textContent = message;
  $("api-key").focus();
}

async function jobView(id) {
  const status = await api.job(id);
  record(status);
  const known = details.get(id) || {};
  if (!known.spec) known.spec = await api.spec(id);
  if (TERMINAL.has(status.status) && status.result) {
    // read again each poll: a sink's load (or a webhook's delivery) goes on after the job ended
    known.results = await api.results(id);
    if (!known.samples) known.samples = await api.errorSamples(id);
  }
  details.set(id, known);
  const view = { status, ...known, throughput: tokensPerSecond(id) };
  return [jobPage(view, () => cancel(id)), view];
}

async function cancel(id) {
  const button = $("cancel-job");
  if (button) button.disabled = true;
  try {
    await api.cancel(id);
    say(`Cancel requested for job ${id}: running shards stop between batches.`);
  } catch (error) {
    say(`Could not cancel: ${error.message}`, true);
  }
  poll(generation);
}

function route() {
  const hash = location.hash || "#/";
  const job = hash.match(/^#\/jobs\/([0-9a-f]{32})$/);
  for (const link of document.querySelectorAll("nav a")) link.removeAttribute("aria-current");
  if (job) return { load: () => jobView(job[1]) };
  if (hash === "#/models") {
    $("nav-models").setAttribute("aria-current", "page");
    return { load: async () => { const list = await api.models(); return [modelList(list), list]; } };
  }
  if (hash === "#/schedules") {
    $("nav-schedules").setAttribute("aria-current", "page");
    return { load: async () => { const list = await api.schedules(); return [scheduleList(list), list]; } };
  }
  $("nav-jobs").setAttribute("aria-current", "page");
  const page = listPage(hash);
  return { load: () => listView(page) };
}

// The list, and each job's tokens/s line from this tab's polls (part of what is shown: a new reading redraws).
async function listView(page) {
  const list = await api.jobs(page.limit, page.before);
  for (const job of list.jobs) record(job);
  const lines = Object.fromEntries(list.jobs.map((job) => [job.id, tokensPerSecond(job.id)]));
  return [jobList(list, page, lines), { list, lines }];
}

// #/?limit=N&before=ID: a page of the list (N jobs, older than job ID); anything else: the newest 50.
function listPage(hash) {
  const query = new URLSearchParams(hash.split("?")[1] || "");
  const limit = Number(query.get("limit"));
  const before = query.get("before");
  return {
    limit: Number.isInteger(limit) && limit >= 1 && limit <= 500 ? limit : 50,
    before: /^[0-9a-f]{32}$/.test(before || "") ? before : null,
  };
}

async function poll(mine) {
  clearTimeout(timer);
  if (mine !== generation) return;
  let delay = POLL_MS;
  try {
    const [node, data] = await route().load();
    if (mine !== generation) return;
    show(node, data);
    if (data.status && TERMINAL.has(data.status.status)) delay = POLL_MS * 5; // an ended job changes no more
    $("updated").textContent = `Updated ${new Date().toLocaleTimeString("en-GB")}`;
    if ($("message").classList.contains("error")) say("");
  } catch (error) {
    if (mine !== generation) return;
    if (error instanceof ApiError && error.status === 401) return askForKey("That key is not valid (unknown, revoked or mistyped).");
    if (error instanceof ApiError && error.status === 404) return show(document.createTextNode(error.message), error.message);
    say(error instanceof ApiError ? error.message : `Cannot reach the API (${error.message}); retrying.`, true);
    delay = POLL_MS * 5;
  }
  if (mine !== generation) return;
  clearTimeout(timer); // a cancel or a return to the tab polled meanwhile: one loop stays
  timer = setTimeout(() => poll(mine), document.hidden ? POLL_MS * 5 : delay);
}

// A navigation (hashchange) takes the focus to the new view. The first view after signing in does too,
// unless the focus is on the nav already: a link reached while the page loaded keeps it (and its keypress).
function navigate(event) {
  generation += 1;
  shown = "";
  say("");
  poll(generation);
  if (event || !$("nav").contains(document.activeElement)) $("view").focus({ preventScroll: true });
}

async function start() {
  $("key-form").hidden = true;
  $("nav").hidden = false;
  try {
    await api.schedules();
    $("nav-schedules").hidden = false; // an admin key
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return askForKey("That key is not valid (unknown, revoked or mistyped).");
    $("nav-schedules").hidden = true; // 403: schedules need an admin key
  }
  navigate();
}

function init() {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    keepKey($("api-key").value.trim());
    $("api-key").value = "";
    start();
  });
  $("forget-key").addEventListener("click", () => { forgetKey(); askForKey("Key forgotten."); });
  window.addEventListener("hashchange", navigate);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(generation); });
  if (storedKey()) start();
  else askForKey();
}

init();
