"""ETA-accuracy benchmark: the ETA a waiting job is given (``queue.eta_s`` of ``GET /v1/jobs/{id}``,
docs/http-api.md#place) against when it actually ends, on the local stack (one compute worker, one
control worker) with two tenants and three jobs.

    python infra/bench/eta_accuracy.py                       # 400, 200 and 400 documents
    python infra/bench/eta_accuracy.py --documents 200 --json out.json

What it does, on one fresh stack (real text: the demo corpus's paragraphs of 200 to 1,000
characters, none truncated, each made unique so that neither the job's duplicates nor reuse skip
any):

- warm-up: a 10-document job (the model loads), then one of half the size, so that the worker has
  measured its tokens/s (without a measurement there is no ETA) and the model's characters per token;
- tenant ``dev`` submits jobs a1 (``--documents``) and a2 (half that), tenant ``bench-other`` b1
  (``--documents``), at once; shards of ``--shard-documents`` documents, so fair share interleaves;
- every 0.25 s it polls the three jobs; for each, the first ETA given (once the job is planned
  and still waits or runs) and the wall time it was given at, the first given once some of its
  text is tokenized (``estimate.measured``: before, its tokens are its characters at the characters
  per token the warm-up measured),
  then when the job ended (``finished_at``). Error = (given - actual) / actual, actual = end -
  time given.

The goal (issue J5) is every job within ±30 %. The machine's load average is reported: a shared
machine changes the pace mid-run, which no ETA can foresee.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from datetime import date
from pathlib import Path

from bench_stack import bench_stack, other_tenant_key

from poolq.api.client.poolq_client import PoolqClient
from poolq.devtools.bench.machine import machine_facts
from poolq.devtools.demo.sample_corpus import load_sample_corpus

TERMINAL = {"succeeded", "partially_succeeded", "failed", "cancelled"}
GOAL = 0.30


def _documents(count: int, prefix: str) -> list[dict]:
    paragraphs = [part for document in load_sample_corpus() for part in document["text"].split("\n\n")
                  if 200 <= len(part) <= 1000]
    return [{"id": f"{prefix}-{i:06d}", "text": f"{paragraphs[i % len(paragraphs)]} ({prefix} {i})"} for i in range(count)]


def _upload_job(client: PoolqClient, documents: list[dict]) -> str:
    uri = client.upload("".join(json.dumps(document) + "\n" for document in documents).encode())
    return client.submit({"input": {"uri": uri}, "long_documents": {"mode": "truncate"}}).id


def _run_to_end(client: PoolqClient, job_id: str, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while client.get(job_id).status.value not in TERMINAL:
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} still running after {timeout} s")
        time.sleep(0.25)


def _watch(jobs: dict[str, tuple[PoolqClient, str]], timeout: float = 3600) -> dict[str, dict]:
    """Poll until every job ended: the first ETA each was given, and its end."""
    seen: dict[str, dict] = {name: {} for name in jobs}
    deadline = time.monotonic() + timeout
    while any("ended_at" not in record for record in seen.values()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs still running after {timeout} s: {seen}")
        for name, (client, job_id) in jobs.items():
            record = seen[name]
            if "ended_at" in record:
                continue
            job, now = client.get(job_id), time.time()
            if job.status.value in TERMINAL:
                if job.status.value != "succeeded":
                    raise RuntimeError(f"job {name} ended {job.status.value}: {job.error}")
                record.update(ended_at=job.finished_at.timestamp(), tokens=job.usage.tokens)
            elif job.queue is not None and job.queue.eta_s is not None:
                if "given_at" not in record:
                    record.update(given_at=now, eta_s=job.queue.eta_s, state=job.status.value,
                                  **job.queue.model_dump(exclude={"eta_s"}))
                if job.estimate.measured and "measured_at" not in record:
                    record.update(measured_at=now, measured_eta_s=job.queue.eta_s)
        time.sleep(0.25)
    return seen


def measure(state, documents: int) -> dict:
    other_key = other_tenant_key(state)
    load_before = os.getloadavg()
    with PoolqClient(state.api_url, state.api_key) as mine, PoolqClient(state.api_url, other_key) as other:
        _run_to_end(mine, _upload_job(mine, _documents(10, "load")))
        _run_to_end(mine, _upload_job(mine, _documents(documents // 2, "warm")))
        submitted = {"a1": (mine, _documents(documents, "a1")), "a2": (mine, _documents(documents // 2, "a2")),
                     "b1": (other, _documents(documents, "b1"))}
        jobs = {name: (client, _upload_job(client, docs)) for name, (client, docs) in submitted.items()}
        seen = _watch(jobs)
    return {"documents": documents, "load_before": load_before, "load_after": os.getloadavg(), "jobs": seen}


def errors(results: dict, given: str = "given_at", eta: str = "eta_s") -> dict[str, float]:
    """Each job's (given - actual) / actual, for the ETA first given (or once measured: ``measured_at``,
    ``measured_eta_s``); a job that ended before it was given one is left out."""
    return {name: (job[eta] - (job["ended_at"] - job[given])) / (job["ended_at"] - job[given])
            for name, job in results["jobs"].items() if given in job}


def report(results: dict) -> str:
    facts = machine_facts()
    off, off_measured = errors(results), errors(results, "measured_at", "measured_eta_s")
    load = "load average {:.1f} before, {:.1f} after (1 min)".format(results["load_before"][0], results["load_after"][0])
    lines = [f"eta accuracy, {date.today().isoformat()}: {facts['cpu']}, {facts['usable_cores']} cores; {load}", "",
             "| job | tenant | tokens | given while | jobs ahead | share | fleet tokens/s | ETA given | actual | error "
             "| once measured: ETA, actual, error |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, job in sorted(results["jobs"].items()):
        actual = job["ended_at"] - job["given_at"]
        tenant = "dev" if name.startswith("a") else "bench-other"
        measured = (f"{job['measured_eta_s']:.1f} s, {job['ended_at'] - job['measured_at']:.1f} s, {off_measured[name]:+.0%}"
                    if name in off_measured else "never measured while it ran")
        lines.append(f"| {name} | {tenant} | {job['tokens']:,} | {job['state']} | {job['jobs_ahead']} "
                     f"| {job['tenant_share']:.0%} | {job['fleet_tokens_per_s']:,.0f} | {job['eta_s']:.1f} s | {actual:.1f} s "
                     f"| {off[name]:+.0%} | {measured} |")
    lines.append("")
    for label, figures in (("first ETA", off), ("ETA once measured", off_measured)):
        within = bool(figures) and all(abs(value) <= GOAL for value in figures.values())
        lines.append(f"every job within ±{GOAL:.0%}, {label}: {'yes' if within else 'no'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=400, help="documents of a1 and b1 (a2: half)")
    parser.add_argument("--shard-documents", type=int, default=25, help="documents a shard (POOLQ_SHARD_MAX_DOCUMENTS)")
    parser.add_argument("--state-dir", type=Path, default=None, help="the stack's directory (default: a temporary one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    args = parser.parse_args(argv)
    os.environ["POOLQ_SHARD_MAX_DOCUMENTS"] = str(args.shard_documents)  # the stack's processes inherit it
    with bench_stack(args.state_dir, "poolq-eta-") as state:
        results = measure(state, args.documents)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
