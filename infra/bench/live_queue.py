"""Live-queue benchmark: how fast the queue answers on the local stack (one compute worker, one
control worker), while a large job runs.

    python infra/bench/live_queue.py                      # 5,000-document large jobs
    python infra/bench/live_queue.py --large-documents 1000 --json out.json

What it measures, in this order, on one fresh stack (real text: the demo corpus):

- ``small job idle``: a 10-document job alone, submitted to finished (its own compute and overheads);
- ``small job behind a large one``: the same job, of another tenant, submitted while a large job
  runs; ``waited`` is the difference, the time spent behind the large job;
- ``progress interval``: while the large job runs, how often its tokens done (``usage.tokens`` +
  ``in_progress.tokens``) change, polled every 0.1 s: median and largest gap;
- ``two tenants``: a second large job of another tenant; once both run, the tokens each does in
  the same window, and their ratio;
- ``cancel, many documents``: the first large job cancelled, request to ``cancelled``;
- ``cancel, one long document``: a single 1.5M-character document (chunked), cancelled once its
  tokens move, request to ``cancelled``;
- ``/v1/embeddings``: a 10-token query, p50 and p95 of 30 requests, with the worker idle and
  while a large job runs (skipped where the API has no such route).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import date
from pathlib import Path

import httpx
from bench_stack import bench_stack, other_tenant_key

from poolq.api.client.poolq_client import PoolqClient
from poolq.devtools.bench.machine import machine_facts
from poolq.devtools.demo.sample_corpus import load_sample_corpus

TERMINAL = {"succeeded", "partially_succeeded", "failed", "cancelled"}
QUERY = "how do vaccines train the immune system"  # about 10 tokens with MiniLM's specials


def _done(job: dict) -> int:
    return job["usage"]["tokens"] + job["in_progress"]["tokens"]


def _wait(client: PoolqClient, job_id: str, until, timeout: float = 1800, interval: float = 0.1) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(job_id)
        if until(job):
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id}: {job['status']} after {timeout} s")
        time.sleep(interval)


def _documents(count: int, prefix: str) -> list[dict]:
    corpus = load_sample_corpus()
    return [{"id": f"{prefix}-{i:06d}", "text": corpus[i % len(corpus)]["text"]} for i in range(count)]


def _long_text(chars: int = 1_500_000) -> str:
    text = "\n\n".join(document["text"] for document in load_sample_corpus())
    return (text * (1 + chars // len(text)))[:chars]


def _submit(client: PoolqClient, documents: list[dict], mode: str = "truncate") -> str:
    return client.submit({"input": {"documents": documents}, "long_documents": {"mode": mode}})["id"]


def _upload_job(client: PoolqClient, documents: list[dict]) -> str:
    """A large job goes through an upload (inline bodies are capped)."""
    uri = client.upload("".join(json.dumps(document) + "\n" for document in documents).encode())
    return client.submit({"input": {"uri": uri}, "long_documents": {"mode": "truncate"}})["id"]


def _small_job(client: PoolqClient, prefix: str) -> float:
    started = time.monotonic()
    job_id = _submit(client, [{"id": f"{prefix}-{i}", "text": f"a short question number {i}"} for i in range(10)])
    final = _wait(client, job_id, lambda j: j["status"] in TERMINAL)
    if final["status"] != "succeeded":
        raise RuntimeError(f"the small job ended {final['status']}: {final.get('error')}")
    return time.monotonic() - started


def _progress_gaps(client: PoolqClient, job_id: str, seconds: float = 20.0) -> list[float]:
    changes, last = [], None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done = _done(client.get(job_id))
        if done != last:
            changes.append(time.monotonic())
            last = done
        time.sleep(0.1)
    return [b - a for a, b in zip(changes, changes[1:])]


def _rates(first: PoolqClient, first_id: str, second: PoolqClient, second_id: str, seconds: float = 90.0):
    """Tokens/s of each job over the same window: several shards of each (fair share hands out whole shards)."""
    a0, b0, started = _done(first.get(first_id)), _done(second.get(second_id)), time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    return (_done(first.get(first_id)) - a0) / elapsed, (_done(second.get(second_id)) - b0) / elapsed


def _cancel_latency(client: PoolqClient, job_id: str) -> float:
    started = time.monotonic()
    client.cancel(job_id)
    final = _wait(client, job_id, lambda j: j["status"] in TERMINAL, timeout=600, interval=0.05)
    if final["status"] != "cancelled":
        raise RuntimeError(f"job {job_id} ended {final['status']}, not cancelled")
    return time.monotonic() - started


def _embedding_latencies(api_url: str, key: str, requests: int = 30) -> list[float] | None:
    latencies = []
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        for _ in range(requests):
            started = time.monotonic()
            answer = http.post("/v1/embeddings", json={"model": "all-MiniLM-L6-v2", "input": QUERY})
            if answer.status_code == 404:
                return None
            answer.raise_for_status()
            latencies.append(time.monotonic() - started)
    return latencies


def _percentiles(values: list[float] | None) -> str:
    if not values:
        return "n/a (no /v1/embeddings route)"
    ordered = sorted(values)
    return f"p50 {statistics.median(ordered) * 1000:.0f} ms, p95 {ordered[int(0.95 * (len(ordered) - 1))] * 1000:.0f} ms"


def measure(state, large_documents: int) -> dict:
    results: dict = {}
    other_key = other_tenant_key(state)
    with PoolqClient(state.api_url, state.api_key) as mine, PoolqClient(state.api_url, other_key) as other:
        results["embeddings_idle_s"] = _embedding_latencies(state.api_url, state.api_key)
        results["small_idle_s"] = _small_job(other, "idle")
        large = _upload_job(mine, _documents(large_documents, "a"))
        _wait(mine, large, lambda j: _done(j) > 0)
        results["small_behind_large_s"] = _small_job(other, "behind")
        results["progress_gaps_s"] = _progress_gaps(mine, large)
        results["embeddings_busy_s"] = _embedding_latencies(state.api_url, state.api_key)
        second = _upload_job(other, _documents(large_documents, "b"))
        _wait(other, second, lambda j: _done(j) > 0)
        results["rates_tokens_per_s"] = _rates(mine, large, other, second)
        results["cancel_many_s"] = _cancel_latency(mine, large)
        _cancel_latency(other, second)
        long_job = _submit(mine, [{"id": "long", "text": _long_text()}], mode="chunked")
        _wait(mine, long_job, lambda j: _done(j) > 0)
        results["cancel_long_s"] = _cancel_latency(mine, long_job)
    return results


def report(results: dict, large_documents: int) -> str:
    gaps = results["progress_gaps_s"]
    rate_a, rate_b = results["rates_tokens_per_s"]
    waited = results["small_behind_large_s"] - results["small_idle_s"]
    rows = [
        ("small job idle (10 documents)", f"{results['small_idle_s']:.2f} s"),
        (f"small job behind a {large_documents:,}-document job", f"{results['small_behind_large_s']:.2f} s "
                                                                  f"(waited {waited:.2f} s)"),
        ("progress interval", f"median {statistics.median(gaps):.2f} s, max {max(gaps):.2f} s" if gaps else "no change"),
        ("two tenants' rates", f"{rate_a:,.0f} and {rate_b:,.0f} tokens/s (ratio {min(rate_a, rate_b) / max(rate_a, rate_b):.2f})"
         if max(rate_a, rate_b) else "no progress"),
        ("cancel, many documents", f"{results['cancel_many_s']:.2f} s"),
        ("cancel, one 1.5M-character document", f"{results['cancel_long_s']:.2f} s"),
        ("/v1/embeddings, idle", _percentiles(results["embeddings_idle_s"])),
        ("/v1/embeddings, under a large job", _percentiles(results["embeddings_busy_s"])),
    ]
    width = max(len(name) for name, _ in rows)
    facts = machine_facts()
    flags = ", ".join(facts["flags"]) or "none of the noted flags"
    lines = [f"live queue, {date.today().isoformat()}: {facts['cpu']}, {facts['usable_cores']} cores; cpu flags: {flags}", ""]
    lines += [f"| {'measure'.ljust(width)} | value |", f"|{'-' * (width + 2)}|---|"]
    lines += [f"| {name.ljust(width)} | {value} |" for name, value in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large-documents", type=int, default=5000)
    parser.add_argument("--state-dir", type=Path, default=None, help="the stack's directory (default: a temporary one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    args = parser.parse_args(argv)
    with bench_stack(args.state_dir, "poolq-live-") as state:
        results = measure(state, args.large_documents)
    print(report(results, args.large_documents))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
