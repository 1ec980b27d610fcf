"""Rebuilding a job's cached status from the ledger (after Redis lost it)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.work_units import PLAN_UNIT, shard_unit
from poolq.jobs.ledger.error_summary import ErrorSummary, merge_all
from poolq.jobs.ledger.job_ledger import Plan, ShardCommit
from poolq.jobs.model.job_ids import is_job_id
from poolq.jobs.model.job_state import JobState
from poolq.jobs.model.job_status import JobCounts, JobResult, JobStatus, JobUsage
from poolq.jobs.observability.job_rates import job_rates
from poolq.storage import ObjectNotFoundError


def status_from_ledger(job_id: str, ctx: JobContext) -> JobStatus | None:
    """What the ledger says of ``job_id``, or None if there is no such job."""
    if not is_job_id(job_id):
        return None
    tenant = ctx.tenant_of(job_id)
    if tenant is None:
        return None
    ledger = ctx.ledger(job_id)
    spec = ledger.spec()
    if spec is None:
        return None
    manifest = ledger.manifest()
    if manifest is not None:
        counts = manifest.counts
        return JobStatus(
            id=job_id, tenant=tenant, status=manifest.status, model=spec.model, task=spec.task_label,
            counts=JobCounts(total=counts.total, completed=counts.completed, failed=counts.failed),
            usage=JobUsage(tokens=manifest.usage.tokens),
            created_at=manifest.created_at or _created_at(job_id, ctx),
            started_at=manifest.started_at, finished_at=manifest.finished_at,
            result=JobResult(manifest_uri=ctx.store.uri(ctx.layout(job_id).manifest)),
            error=manifest.error, errors_by_code=manifest.errors.by_code, error_samples=manifest.errors.samples,
        )
    plan = ledger.plan()
    commits = ledger.commits() if plan else {}
    state = JobState.CANCELLING if ledger.cancel_requested() else JobState.RUNNING if plan else JobState.QUEUED
    completed = sum(c.documents for c in commits.values()) + (plan.carried_records if plan else 0)
    failed = sum(c.errors for c in commits.values()) + (plan.plan_errors if plan else 0)
    errors = job_errors(plan, commits)
    return JobStatus(
        id=job_id, tenant=tenant, status=state, model=spec.model, task=spec.task_label,
        counts=JobCounts(total=plan.total if plan else None, completed=completed, failed=failed),
        usage=JobUsage(tokens=sum(c.tokens for c in commits.values())),
        created_at=_created_at(job_id, ctx), errors_by_code=errors.codes, error_samples=list(errors.samples),
    )


def job_errors(plan: Plan | None, commits: dict[int, ShardCommit]) -> ErrorSummary:
    """The job's errors in brief: planning's, then each committed shard's in shard order."""
    plan_errors = [plan.errors_summary] if plan is not None else []
    return merge_all([*plan_errors, *(commit.errors_summary for _, commit in sorted(commits.items()))])


def recover_status(job_id: str, ctx: JobContext) -> JobStatus | None:
    """Rebuild the cached status (record, counters, plan fields) from the ledger; returns it."""
    status = status_from_ledger(job_id, ctx)
    if status is None:
        return None
    if ctx.status.create(status):
        if status.status.is_terminal:
            ctx.status.expire(job_id, ctx.settings.finished_job_ttl_s)  # read back for a while, then again
        else:
            ctx.status.add_active(status.tenant, job_id)  # counts toward its cap and the jobs gauge again
        ledger = ctx.ledger(job_id)
        plan = ledger.plan()
        if plan is not None:
            units = [PLAN_UNIT, *(shard_unit(shard) for shard in ledger.committed_shards())]
            ctx.status.set_counts(
                job_id, units, completed=status.counts.completed, failed=status.counts.failed, tokens=status.usage.tokens,
                errors=ErrorSummary(status.errors_by_code, tuple(status.error_samples)),
            )
            ctx.status.update(job_id, total=plan.total, num_shards=plan.num_shards, expected_units=plan.num_shards + 1)
    return ctx.status.get(job_id)


def _created_at(job_id: str, ctx: JobContext) -> datetime:
    try:
        return datetime.fromisoformat(json.loads(ctx.store.get(ctx.service_layout.active(job_id)))["created_at"])
    except (ObjectNotFoundError, KeyError, ValueError):
        return datetime.now(timezone.utc)


def current_status(job_id: str, ctx: JobContext) -> JobStatus | None:
    """The job's status: the cache's, else rebuilt from the ledger (Redis may have lost it; the
    ledger has not), with its rates so far. None if there is no such job."""
    status = ctx.status.get(job_id) or recover_status(job_id, ctx)
    return None if status is None else status.model_copy(update={"rates": job_rates(status)})
