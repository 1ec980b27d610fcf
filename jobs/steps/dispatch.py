"""Handing work on: send a unit's task (noting when), count finished units, start finalizing.

Units of work are named ``plan``, ``plan-scan-00003`` and ``plan-cut-00003`` (a section's planning
stages), ``shard-00007`` and ``finalize``; leases, dispatch times and counters all use these names.
"""
from __future__ import annotations

import time

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.leases import LeaseStore
from poolq.jobs.coordination.work_units import FINALIZE_UNIT, PLAN_UNIT, section_unit, shard_unit
from poolq.jobs.ledger.job_ledger import JobLedger, Plan, ShardCommit
from poolq.jobs.ledger.planning_ledger import SectionStage


def dispatch_plan(job_id: str, ctx: JobContext) -> None:
    ctx.status.note_dispatch(job_id, [PLAN_UNIT], time.time())
    ctx.enqueuer.plan(job_id)


def dispatch_section(job_id: str, stage: SectionStage, sections: list[int], ctx: JobContext) -> None:
    ctx.status.note_dispatch(job_id, [section_unit(stage, section) for section in sections], time.time())
    for section in sections:
        ctx.enqueuer.plan_section(job_id, stage.value, section)


def dispatch_shards(job_id: str, shards: list[int], ctx: JobContext) -> None:
    ctx.status.note_dispatch(job_id, [shard_unit(shard) for shard in shards], time.time())
    for shard in shards:
        ctx.enqueuer.run_shard(job_id, shard)


def fill_window(job_id: str, num_shards: int, ctx: JobContext) -> list[int]:
    """Claim shards up to the job's dispatch window and send their tasks; returns them."""
    claimed = ctx.window.claim(job_id, ctx.settings.dispatch_window, num_shards)
    dispatch_shards(job_id, claimed, ctx)
    return claimed


def dispatch_finalize(job_id: str, ctx: JobContext) -> None:
    ctx.status.note_dispatch(job_id, [FINALIZE_UNIT], time.time())
    ctx.enqueuer.finalize(job_id)


def record_plan(job_id: str, plan: Plan, ctx: JobContext) -> None:
    """Cache the plan's figures in the status (idempotent): shards and totals, what planning counted."""
    ctx.status.update(job_id, total=plan.total, num_shards=plan.num_shards, expected_units=plan.num_shards + 1)
    ctx.status.count_unit(job_id, PLAN_UNIT, completed=plan.carried_records, failed=plan.plan_errors,
                          errors=plan.errors_summary)


def record_shard(job_id: str, shard: int, commit: ShardCommit, ctx: JobContext) -> None:
    """Count a committed shard once, move the dispatch window on (release it, send the next);
    the count that completes the job sends the finalizer."""
    counted = ctx.status.count_unit(
        job_id, shard_unit(shard), completed=commit.documents, failed=commit.errors, tokens=commit.tokens,
        errors=commit.errors_summary,
    )
    ctx.window.release(job_id, shard)
    ctx.status.drop_dispatch(job_id, shard_unit(shard))
    num_shards = ctx.status.field(job_id, "num_shards")
    if num_shards is not None:
        fill_window(job_id, int(num_shards), ctx)
    expected = ctx.status.field(job_id, "expected_units")
    if expected is not None and counted >= int(expected):
        dispatch_finalize(job_id, ctx)


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


def finalize_if_ready(job_id: str, ctx: JobContext) -> bool:
    if ready_to_finalize(ctx.ledger(job_id), ctx.leases):
        dispatch_finalize(job_id, ctx)
        return True
    return False
