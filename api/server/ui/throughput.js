// Tokens per second over time, from the polls themselves: each poll's tokens done (committed plus in
// progress) of each running job, kept in memory for this tab only, and the rate between one reading
// and the next. (The status's rates.tokens_per_s is the average since the job started: it hides a
// slowdown.) A job's readings stop when it ends and stay, so its line is still drawn afterwards.
import { tokensDone } from "./dom.js";

export const KEPT = 120; // rates kept per job: 4 minutes of the page's 2 s polls
const MAX_JOBS = 200; // jobs remembered; the one seen longest ago is dropped first
const MIN_GAP_MS = 1000; // a poll this soon after the last (a cancel's, a tab coming back) would give a noisy rate
const WATCHED = new Set(["running", "cancelling"]);
const readings = new Map(); // job id -> [[ms, tokens done], ...], oldest first; the job seen last at the end

export function record(job, now = Date.now()) {
  if (!WATCHED.has(job.status)) return;
  const kept = readings.get(job.id) || [];
  if (kept.length && now - kept.at(-1)[0] < MIN_GAP_MS) return;
  kept.push([now, tokensDone(job)]);
  if (kept.length > KEPT + 1) kept.shift();
  readings.delete(job.id);
  readings.set(job.id, kept);
  if (readings.size > MAX_JOBS) readings.delete(readings.keys().next().value);
}

// [[ms, tokens/s], ...] between consecutive readings, oldest first; never below 0 (a running shard's
// work can be dropped, e.g. when it is cancelled).
export function tokensPerSecond(id) {
  const kept = readings.get(id) || [];
  return kept.slice(1).map(([time, tokens], index) => {
    const [before, tokensBefore] = kept[index];
    return [time, Math.max(0, ((tokens - tokensBefore) * 1000) / (time - before))];
  });
}
