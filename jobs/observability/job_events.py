"""A job's story in the logs: one line each when it is submitted, planned, when each shard
starts and commits, and when it finishes.

Every line carries ``event``, ``job_id`` and ``tenant`` (in JSON logs, as fields: ``jq
'select(.job_id == "ID")'`` follows one job across the API's and the workers' logs; `poolq logs
ID` does that for a local stack), and what that step counts. Lines go to the ``poolq.jobs.story``
logger at INFO. Submission is logged by the API (or the in-process runner), the rest by workers.
"""
from __future__ import annotations

import logging

from poolq.jobs.ledger.job_ledger import Plan, ShardCommit
from poolq.jobs.ledger.manifest import JobManifest

log = logging.getLogger("poolq.jobs.story")
#: The LogRecord attribute JsonFormatter adds to the line, field by field.
EVENT_FIELDS = "event_fields"
EVENTS = ("job_submitted", "job_planned", "shard_started", "shard_committed", "job_finished")


def _event(event: str, job_id: str, tenant: str, message: str, **fields: object) -> None:
    log.info(f"job {job_id}: {message}", extra={EVENT_FIELDS: {"event": event, "job_id": job_id, "tenant": tenant,
                                                                **fields}})


def job_submitted(job_id: str, tenant: str, *, model: str, task: str, documents: int | None, source: str) -> None:
    """``documents``: the inline documents' count; None for an input read later (a URI, ``source``)."""
    counted = f"{documents} inline documents" if documents is not None else source
    _event("job_submitted", job_id, tenant, f"submitted ({model}, {task}; {counted})", model=model, task=task,
           documents=documents, source=source)


def job_planned(job_id: str, tenant: str, plan: Plan) -> None:
    _event("job_planned", job_id, tenant,
           f"planned: {plan.num_shards} shards, {plan.total} documents ({plan.plan_errors} rejected, "
           f"{plan.carried_records} carried over)",
           shards=plan.num_shards, documents=plan.total, rejected=plan.plan_errors, carried=plan.carried_records)


def shard_started(job_id: str, tenant: str, *, shard: int, attempt: str, documents: int) -> None:
    _event("shard_started", job_id, tenant, f"shard {shard} started (attempt {attempt}, {documents} documents)",
           shard=shard, attempt=attempt, documents=documents)


def shard_committed(job_id: str, tenant: str, *, shard: int, commit: ShardCommit, seconds: float) -> None:
    _event("shard_committed", job_id, tenant,
           f"shard {shard} committed (attempt {commit.attempt}): {commit.documents} documents, {commit.errors} failed, "
           f"{commit.tokens} tokens in {seconds:.2f} s" + (" (gave up)" if commit.gave_up else ""),
           shard=shard, attempt=commit.attempt, documents=commit.documents, failed=commit.errors, rows=commit.rows,
           tokens=commit.tokens, seconds=round(seconds, 3), gave_up=commit.gave_up)


def job_finished(job_id: str, tenant: str, manifest: JobManifest) -> None:
    counts = manifest.counts
    seconds = manifest.timings.running_s
    _event("job_finished", job_id, tenant,
           f"{manifest.status.value}: {counts.completed}/{counts.total} documents, {counts.failed} failed, "
           f"{manifest.usage.tokens} tokens" + (f"; error: {manifest.error}" if manifest.error else ""),
           status=manifest.status.value, total=counts.total, completed=counts.completed, failed=counts.failed,
           not_processed=counts.not_processed, rows=counts.rows, tokens=manifest.usage.tokens,
           seconds=None if seconds is None else round(seconds, 3), error=manifest.error)
