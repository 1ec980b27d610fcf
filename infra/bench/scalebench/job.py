"""The job under test: submitting it over HTTP, waiting for it, and reading its timings, shard metrics and shard count."""
from __future__ import annotations

import argparse
import json
import time
from datetime import datetime

from scalebench.result import RunResult

DEV_TENANT = "dev"
TERMINAL = ("succeeded", "partially_succeeded", "failed", "cancelled")


def shard_metrics(api_url: str) -> tuple[float, int]:
    """(sum of shard durations, committed shards) from the API's /metrics."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{api_url}/metrics", timeout=30).text
    total, count = 0.0, 0
    for family in text_string_to_metric_families(text):
        if family.name == "poolq_shard_duration_seconds":
            for sample in family.samples:
                if sample.name.endswith("_sum"):
                    total = sample.value
                elif sample.name.endswith("_count"):
                    count = int(sample.value)
    return total, count


def submit_and_wait(state, r, uri: str, args: argparse.Namespace, result: RunResult, log) -> dict | None:
    """Submit the job for ``uri``, wait for it (cancelled after ``args.timeout``) and fill ``result``'s
    status, timings and shard metrics. Returns the final status (None on timeout)."""
    from poolq.api.client.poolq_client import PoolqClient

    before_sum, before_count = shard_metrics(state.api_url)
    body = {"model": args.model, "input": {"uri": uri}, "long_documents": {"mode": "truncate"},
            "output": {"dtype": args.output_dtype}}
    with PoolqClient(state.api_url, state.api_key, timeout=60) as client:
        job = client.submit(body)
        result.job_id = job["id"]
        final, plan_seen = wait_for_job(client, r, job["id"], args.timeout, result.documents, log,
                                        cancel_when_planned=args.plan_only)
    result.status = final["status"] if final else "timeout"
    fill_timings(result, final, plan_seen)
    after_sum, after_count = shard_metrics(state.api_url)
    result.shard_seconds = after_sum - before_sum
    result.shards_committed_metric = after_count - before_count
    if result.e2e_s:
        result.shard_share = result.shard_seconds / (args.workers * result.e2e_s)
    return final


def wait_for_job(client, r, job_id: str, timeout_s: float, documents: int, log,
                 cancel_when_planned: bool = False) -> tuple[dict | None, float | None]:
    """Poll the job's Redis status hash every 0.1 s (and the API every 5 s) until it is terminal or
    ``timeout_s`` passes (then cancel it, bounded); with ``cancel_when_planned``, cancel it once it
    is planned. Returns (final status from the API, or None on timeout; the wall-clock time
    num_shards first appeared)."""
    deadline = time.monotonic() + timeout_s
    plan_seen, last_report = None, time.monotonic()
    key = f"poolq:job:{job_id}"
    while time.monotonic() < deadline:
        fields = r.hmget(key, "status", "num_shards", "completed", "failed")
        now = time.time()
        if plan_seen is None and fields[1] is not None:
            plan_seen = now
            log(f"[{documents}] planned: {int(fields[1])} shard(s)")
            if cancel_when_planned:
                client.cancel(job_id)
                return client.wait(job_id, poll_interval=0.5, timeout=300), plan_seen
        if fields[0] is not None and fields[0].decode() in TERMINAL:
            return client.wait(job_id, poll_interval=0.2, timeout=120), plan_seen
        if time.monotonic() - last_report > 5:
            last_report = time.monotonic()
            log(f"[{documents}]   {fields[0].decode() if fields[0] else '?'}: "
                f"{int(fields[2] or 0) + int(fields[3] or 0)}/{documents} documents")
        time.sleep(0.1)
    log(f"[{documents}] timed out after {timeout_s:g}s: cancelling job {job_id}")
    try:
        client.cancel(job_id)
        client.wait(job_id, poll_interval=1, timeout=120)
    except Exception as exc:  # noqa: BLE001 - the run is over either way
        log(f"[{documents}] cancel did not finish: {exc}")
    return None, plan_seen


def fill_timings(result: RunResult, final: dict | None, plan_seen: float | None) -> None:
    if not final:
        return
    created = datetime.fromisoformat(final["created_at"])
    if plan_seen is not None:
        result.plan_s = plan_seen - created.timestamp()
    if final.get("started_at"):
        result.queued_s = (datetime.fromisoformat(final["started_at"]) - created).total_seconds()
    if final.get("finished_at"):
        result.e2e_s = (datetime.fromisoformat(final["finished_at"]) - created).total_seconds()
    result.completed, result.failed = final["counts"]["completed"], final["counts"]["failed"]
    result.tokens = final["usage"]["tokens"]
    if result.e2e_s:
        result.docs_per_s = result.completed / result.e2e_s


def _int_or_none(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def read_outcome(state, s3_config, output_prefix: str, r, final: dict | None, result: RunResult) -> None:
    """``result``'s shards (the manifest's, else the plan's in Redis) and plan.json LastModified - created_at,
    read with a client of its own (not counted: the benchmark's reads)."""
    from poolq.jobs.ledger.layout import ServiceLayout
    from poolq.storage import S3ObjectStore, make_s3_client

    store = S3ObjectStore(make_s3_client(s3_config), state.bucket, s3_config)
    layout = ServiceLayout(output_prefix).job(DEV_TENANT, result.job_id)
    try:
        manifest = json.loads(store.get(layout.manifest))
        result.shards = manifest["shards"]["total"]
    except Exception:  # noqa: BLE001 - no manifest (timeout, failure): the plan may still say
        result.shards = _int_or_none(r.hget(f"poolq:job:{result.job_id}", "num_shards"))
    try:
        modified = store.client.head_object(Bucket=state.bucket, Key=layout.plan)["LastModified"]
        if final:
            # LastModified has whole seconds: it can read up to 1 s before created_at
            result.plan_ledger_s = max(0.0, (modified - datetime.fromisoformat(final["created_at"])).total_seconds())
    except Exception:  # noqa: BLE001 - never planned
        pass
