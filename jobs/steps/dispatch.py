"""Handing work on: send a unit's task (noting when), count finished units, start finalizing.

Units of work are named ``plan``, ``plan-scan-00003`` and ``plan-cut-00003`` (a section's planning
stages), ``shard-00007`` and ``finalize``; leases, dispatch times and counters all use these names.
Shards go out by fair share (``coordination/fair_share.py``): a planned job joins it, and each
slot a shard frees goes to the shard next in line, of whichever job and tenant that is.
"""
from __future__ import annotations

import time
from collections import defaultdict
from datetime import datetime, timezone

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.fair_share import Claim
from poolq.jobs.coordination.leases import LeaseStore
from poolq.jobs.coordination.status_store import CHARACTERS_FIELD, UnitCounts
from poolq.jobs.coordination.work_units import FINALIZE_UNIT, PLAN_UNIT, section_unit, shard_unit
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.job_ledger import JobLedger, Plan, ShardCommit
from poolq.jobs.ledger.planning_ledger import SectionStage
from poolq.jobs.steps.shards.budget import budget_passed, stop_for_budget
from poolq.jobs.steps.shards.shard_routing import ShardRouter


def dispatch_plan(job: JobHandle) -> None:
    job.ctx.status.note_dispatch(job.id, [PLAN_UNIT], time.time())
    job.ctx.enqueuer.plan(job.id)


def dispatch_section(job: JobHandle, stage: SectionStage, sections: list[int]) -> None:
    job.ctx.status.note_dispatch(job.id, [section_unit(stage, section) for section in sections], time.time())
    for section in sections:
        job.ctx.enqueuer.plan_section(job.id, stage.value, section)


def dispatch_shards(job: JobHandle, shards: list[int]) -> None:
    job.ctx.status.note_dispatch(job.id, [shard_unit(shard) for shard in shards], time.time())
    send_shards(job.ctx, {job.id: shards})


def open_shards(job: JobHandle, plan: Plan) -> list[Claim]:
    """The job is planned: its shards join fair share, each weighted by its estimated work (the
    job's characters over its shards), and the free slots are handed out."""
    job.ctx.fair.open(job.id, job.tenant, plan.num_shards, plan.characters / max(1, plan.num_shards))
    return dispatch_waiting(job.ctx)


def dispatch_waiting(ctx: JobContext) -> list[Claim]:
    """Hand every free slot to the shard next in fair share and send its task; returns them."""
    claims = ctx.fair.claim(shard_slots(ctx))
    by_job: dict[str, list[int]] = defaultdict(list)
    for claim in claims:
        by_job[claim.job_id].append(claim.shard)
    for job_id, shards in by_job.items():
        ctx.status.note_dispatch(job_id, [shard_unit(shard) for shard in shards], time.time())
    send_shards(ctx, by_job)
    return claims


def send_shards(ctx: JobContext, by_job: dict[str, list[int]]) -> None:
    """Send each shard's task where its model is held, if a holder can take it soon (``shard_routing``)."""
    router = ShardRouter(ctx)
    for job_id, shards in by_job.items():
        for shard in shards:
            ctx.enqueuer.run_shard_on(job_id, shard, router.queue_of_job(job_id))
    router.record()


def shard_slots(ctx: JobContext) -> int:
    """Shard tasks out at once, over every job: a few per live compute worker (a worker about to
    be free finds its next task waiting, and nothing more queues up); before any worker has said
    it is alive, ``dispatch_window``."""
    live = ctx.workers.live()
    return live * ctx.settings.sharding.shards_per_worker if live else ctx.settings.sharding.dispatch_window


def release_shard(job: JobHandle, shard: int) -> None:
    """The shard's task ends without a commit to count (its job was cancelled or finished): its
    slot goes to the next shard in line."""
    job.ctx.fair.release(job.id, shard)
    dispatch_waiting(job.ctx)


def dispatch_finalize(job: JobHandle) -> None:
    job.ctx.status.note_dispatch(job.id, [FINALIZE_UNIT], time.time())
    job.ctx.enqueuer.finalize(job.id)


def record_plan(job: JobHandle, plan: Plan) -> None:
    """Cache the plan's figures in the status (idempotent): shards and totals, what planning counted."""
    job.ctx.status.update(job.id, total=plan.total, num_shards=plan.num_shards, expected_units=plan.num_shards + 1,
                          **{CHARACTERS_FIELD: plan.characters})
    planned = UnitCounts(completed=plan.carried_records, failed=plan.plan_errors)
    job.ctx.status.count_unit(job.id, PLAN_UNIT, planned, errors=plan.errors_summary)


def publish_plan(job: JobHandle, plan: Plan) -> None:
    """A committed plan: cached in the status store; its shards join fair share, and the free slots go out."""
    record_plan(job, plan)
    if plan.num_shards == 0:
        dispatch_finalize(job)
        return
    open_shards(job, plan)  # the rest follow, by fair share, as shards commit
    job.ctx.hooks.job_planned(job)  # the products': the webhook's job.running, with the job's place


def record_shard(job: JobHandle, shard: int, commit: ShardCommit) -> None:
    """Count a committed shard once (for the job, and for its tenant's day) and free its slot for the
    next shard in line; the count that completes the job sends the finalizer, and one that brings an
    unfinished job past its token budget stops it first (before its next shard could go out)."""
    ctx = job.ctx
    counted = ctx.status.count_unit(job.id, shard_unit(shard), _counts_of(commit), errors=commit.errors_summary)
    ctx.day_usage.add(job.tenant, f"{job.id}/{shard_unit(shard)}", commit.tokens, datetime.now(timezone.utc))
    expected = ctx.status.field(job.id, "expected_units")
    complete = expected is not None and counted >= int(expected)
    if not complete and budget_passed(job):
        stop_for_budget(job)
    ctx.fair.release(job.id, shard)
    ctx.status.drop_dispatch(job.id, shard_unit(shard))
    dispatch_waiting(ctx)
    if complete:
        dispatch_finalize(job)


def ready_to_finalize(ledger: JobLedger, leases: LeaseStore) -> bool:
    """True when the ledger says nothing more will be committed.

    Every shard is committed, or a cancel was requested and no shard (or plan) is still running.
    """
    cancelled = ledger.cancel_requested()
    plan = ledger.plan()
    job_id = ledger.layout.job_id
    if plan is None:
        return cancelled and leases.holder(job_id, PLAN_UNIT) is None
    committed = ledger.committed_shards()
    if len(committed) >= plan.num_shards:
        return True
    if not cancelled:
        return False
    running = set(leases.live_units(job_id))
    return not any(shard_unit(shard) in running for shard in range(plan.num_shards) if shard not in committed)


def finalize_if_ready(job: JobHandle) -> bool:
    if ready_to_finalize(job.ledger, job.ctx.leases):
        dispatch_finalize(job)
        return True
    return False


def _counts_of(commit: ShardCommit) -> UnitCounts:
    """What a committed shard adds to its job's counters (its error lines less the records a stop left unrun)."""
    return UnitCounts(completed=commit.documents, failed=commit.errors - commit.not_processed,
                      not_processed=commit.not_processed, tokens=commit.tokens, characters=commit.characters,
                      reused_documents=commit.reused_documents, reused_tokens=commit.reused_tokens)
