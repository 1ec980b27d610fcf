"""Rebuilding a job's cached status from the ledger (after Redis lost it)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from poolq.jobs.coordination.status_store import CHARACTERS_FIELD, UnitCounts
from poolq.jobs.coordination.work_units import PLAN_UNIT, shard_unit
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.error_summary import ErrorSummary, merge_all
from poolq.jobs.ledger.job_ledger import Plan, ShardCommit
from poolq.jobs.ledger.webhook_records import JOB_ENDED, WebhookRecords
from poolq.jobs.observability.job_rates import job_rates
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobCounts, JobResult, JobStatus, JobUsage
from poolq.jobs.status.job_place import job_place
from poolq.jobs.status.token_prior import priced
from poolq.storage import ObjectNotFoundError


def status_from_ledger(job: JobHandle) -> JobStatus | None:
    """What the ledger says of ``job``, or None while it has no spec (a submission under way)."""
    tenant = job.tenant
    ledger = job.ledger
    spec = ledger.spec()
    if spec is None:
        return None
    manifest = ledger.manifest()
    if manifest is not None:
        counts = manifest.counts
        return JobStatus(
            id=job.id, tenant=tenant, status=manifest.status, model=spec.model, task=spec.task_label,
            counts=JobCounts(total=counts.total, completed=counts.completed, failed=counts.failed,
                             not_processed=counts.not_processed),
            usage=JobUsage(tokens=manifest.usage.tokens),
            created_at=manifest.created_at or _created_at(job),
            started_at=manifest.started_at, finished_at=manifest.finished_at,
            result=JobResult(manifest_uri=job.ctx.store.uri(job.layout.manifest)),
            error=manifest.error, errors_by_code=manifest.errors.by_code, error_samples=manifest.errors.samples,
            webhook=WebhookRecords(job.ctx.store, job.layout).outcome(JOB_ENDED) if spec.webhook else None,
            reuse=manifest.reuse, sinks=list(manifest.sinks) if manifest.sinks else None,
        )
    plan = ledger.plan()
    commits = ledger.commits() if plan else {}
    state = JobState.CANCELLING if ledger.cancel_requested() else JobState.RUNNING if plan else JobState.QUEUED
    completed = sum(c.documents for c in commits.values()) + (plan.carried_records if plan else 0)
    not_processed = sum(c.not_processed for c in commits.values())
    failed = sum(c.errors for c in commits.values()) - not_processed + (plan.plan_errors if plan else 0)
    errors = job_errors(plan, commits)
    return JobStatus(
        id=job.id, tenant=tenant, status=state, model=spec.model, task=spec.task_label,
        counts=JobCounts(total=plan.total if plan else None, completed=completed, failed=failed,
                         not_processed=not_processed),
        usage=JobUsage(tokens=usage_tokens(commits)),
        created_at=_created_at(job), errors_by_code=errors.codes, error_samples=list(errors.samples),
    )


def usage_tokens(commits: dict[int, ShardCommit]) -> int:
    """The job's ``usage.tokens``, running or ended, whatever the end: every token the model ran in the
    committed attempts (rows, and what a cancel stopped mid-way). Rows carried from an earlier run
    (``incremental_from``) cost nothing here; an attempt that lost its commit (a crash, a redelivery)
    is the service's, not the job's."""
    return sum(commit.tokens for commit in commits.values())


def job_errors(plan: Plan | None, commits: dict[int, ShardCommit]) -> ErrorSummary:
    """The job's errors in brief: planning's, then each committed shard's in shard order."""
    plan_errors = [plan.errors_summary] if plan is not None else []
    return merge_all([*plan_errors, *(commit.errors_summary for _, commit in sorted(commits.items()))])


def recover_status(job: JobHandle) -> JobStatus | None:
    """Rebuild the cached status (record, counters, plan fields) from the ledger; returns it."""
    ctx = job.ctx
    status = status_from_ledger(job)
    if status is None:
        return None
    if ctx.status.create(status):
        if status.status.is_terminal:
            ctx.status.expire(job.id, ctx.settings.reliability.finished_job_ttl_s)  # read back for a while, then again
        else:
            ctx.status.add_active(status.tenant, job.id)  # counts toward its cap and the jobs gauge again
        ledger = job.ledger
        plan = ledger.plan()
        if plan is not None:
            commits = ledger.commits()
            units = [PLAN_UNIT, *(shard_unit(shard) for shard in commits)]
            totals = UnitCounts(completed=status.counts.completed, failed=status.counts.failed, tokens=status.usage.tokens,
                                not_processed=status.counts.not_processed,
                                characters=sum(c.characters for c in commits.values()),
                                reused_documents=sum(c.reused_documents for c in commits.values()),
                                reused_tokens=sum(c.reused_tokens for c in commits.values()))
            ctx.status.set_counts(job.id, units, totals, errors=ErrorSummary(status.errors_by_code, tuple(status.error_samples)))
            ctx.status.update(job.id, total=plan.total, num_shards=plan.num_shards, expected_units=plan.num_shards + 1,
                              **{CHARACTERS_FIELD: plan.characters})
    return ctx.status.get(job.id)


def _created_at(job: JobHandle) -> datetime:
    try:
        return datetime.fromisoformat(json.loads(job.ctx.store.get(job.ctx.service_layout.active(job.id)))["created_at"])
    except (ObjectNotFoundError, KeyError, ValueError):
        return datetime.now(timezone.utc)


def current_status(job: JobHandle, *, place: bool = True) -> JobStatus | None:
    """The job's status: the cache's, else rebuilt from the ledger (Redis may have lost it; the
    ledger has not), with its rates so far and, unless ``place`` is False (listings), its place in
    fair share while queued or running. None while it has no spec (a submission under way)."""
    status = job.ctx.status.get(job.id) or recover_status(job)
    if status is None:
        return None
    queue = job_place(job.ctx, status) if place else None  # prices every job in line itself (once)
    # An unmeasured estimate at its model's prior (token_prior.py): the tokens the ETA counts.
    [status] = priced(job.ctx, [status])
    return status.model_copy(update={"rates": job_rates(status), "queue": queue})
