"""The reconciler: a periodic pass that makes Redis agree with the ledger and keeps jobs moving.

For every active job it rebuilds a lost status, re-sends tasks whose messages were lost (a unit
neither committed nor leased, whose task was not sent recently), finalizes jobs the ledger says
are done (and concludes those whose finalizer stopped after the manifest: status, sink loads, end
event, clean-up), deletes losing attempts' objects and aborts stale multipart uploads. A sink load
left pending past its lease is sent again, the job long gone from the active list or not
(``products/sinks/pending_loads.py``). Lapsed leases
simply expire (they carry a TTL), after which their units count as not running. Before the
jobs, it re-syncs RedBeat's schedule entries and runs schedule slots that beat missed
(``missed_slots.py``).

Which units are lost is decided in ``lost_units.py``; a job still planning gets its plan task
again, which re-sends lost section tasks (``planner.py``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.work_units import FINALIZE_UNIT, PLAN_UNIT, shard_unit
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.status.current_status import recover_status
from poolq.jobs.steps.cleanup import abort_stale_uploads
from poolq.jobs.steps.dispatch import (
    dispatch_finalize,
    dispatch_plan,
    dispatch_shards,
    open_shards,
    ready_to_finalize,
    record_plan,
)
from poolq.jobs.steps.finalizer import conclude_job
from poolq.jobs.steps.lost_units import LostUnits, QueueDepths
from poolq.products.batches.batch_layout import active_batches_prefix
from poolq.products.batches.file_expiry import delete_expired_files
from poolq.products.schedules.beat_entries import sync_beat_entries
from poolq.products.schedules.missed_slots import catch_up_missed_slots
from poolq.products.sinks.pending_loads import resend_stuck_loads

log = logging.getLogger(__name__)


@dataclass
class ReconcileReport:
    jobs: int = 0
    recovered: list[str] = field(default_factory=list)  # statuses rebuilt from the ledger
    resent: list[str] = field(default_factory=list)  # "<job>/<unit>" tasks sent again
    finalized: list[str] = field(default_factory=list)
    deleted_objects: int = 0
    aborted_uploads: int = 0
    batches: int = 0  # unfinished OpenAI-style batches sent their next step
    expired_files: int = 0  # OpenAI-style files deleted at their expires_at
    caught_up: list[str] = field(default_factory=list)  # schedules whose missed slot ran now


def active_jobs(ctx: JobContext) -> list[str]:
    prefix = ctx.service_layout.active_prefix
    return [key[len(prefix):] for key in ctx.store.list(prefix)]


def reconcile(ctx: JobContext, now: float | None = None) -> ReconcileReport:
    """One pass over every active job. Safe to run anywhere, any number of times, concurrently."""
    report = ReconcileReport()
    now = time.time() if now is None else now
    synced = sync_beat_entries(ctx)  # RedBeat entries from the stored schedules (never raises)
    report.caught_up = catch_up_missed_slots(  # never raises; the schedules the sync read, not a second listing
        ctx, datetime.fromtimestamp(now, timezone.utc), synced.schedules if synced is not None else None)
    queues = QueueDepths(ctx)
    for job_id in active_jobs(ctx):
        report.jobs += 1
        try:
            _reconcile_job(JobHandle.bind(ctx, job_id), now, queues, report)
        except Exception:  # noqa: BLE001 - one broken job must not stop the pass over the others
            log.exception("reconciling job %s failed", job_id)
    report.resent += _resend_stuck_loads(ctx, now)
    report.batches = _advance_batches(ctx)
    report.expired_files = _delete_expired_files(ctx, now)
    return report


def _resend_stuck_loads(ctx: JobContext, now: float) -> list[str]:
    try:
        return resend_stuck_loads(ctx, now)  # after the active jobs: a job concluded in this pass is marked by now
    except Exception:  # noqa: BLE001 - the store is failing: the next pass sends them
        log.exception("re-sending stuck sink loads failed")
        return []


def _delete_expired_files(ctx: JobContext, now: float) -> int:
    try:
        return delete_expired_files(ctx, now)
    except Exception:  # noqa: BLE001 - the store is failing: the next pass deletes them
        log.exception("deleting expired files failed")
        return 0


def _advance_batches(ctx: JobContext) -> int:
    """Send every unfinished batch its next step (a batch's own task decides what that is:
    usually nothing; writing its files once its job has ended; stopping it past its window)."""
    prefix = active_batches_prefix(ctx.service_layout)
    sent = 0
    for key in ctx.store.list(prefix):
        tenant, _, batch_id = key[len(prefix):].partition("/")
        try:
            ctx.enqueuer.advance_batch(tenant, batch_id)
            sent += 1
        except Exception:  # noqa: BLE001 - one batch must not stop the pass over the others
            log.exception("sending batch %s its next step failed", batch_id)
    return sent


def _counted_all(job: JobHandle) -> bool:
    status = job.ctx.status.get(job.id)
    if status is None or status.counts.total is None:
        return False
    return status.counts.completed + status.counts.failed >= status.counts.total


def _reconcile_job(job: JobHandle, now: float, queues: QueueDepths, report: ReconcileReport) -> None:
    ctx = job.ctx
    ledger = job.ledger
    manifest = ledger.manifest()
    if manifest is not None:  # finished, but its status or clean-up may not have caught up
        if ctx.status.get(job.id) is None:
            recover_status(job)
        conclude_job(job, manifest)  # a finalizer that died after the manifest sent no sink load or end event
        report.finalized.append(job.id)
        return
    if ledger.spec() is None:
        return  # submission still in flight (or abandoned before its spec was written)
    if ctx.status.get(job.id) is None:
        recover_status(job)
        report.recovered.append(job.id)
    report.aborted_uploads += abort_stale_uploads(job, ctx.settings.reliability.stale_upload_s)
    lost = LostUnits(job, now, queues)

    # The ledger's verdict lists the job's commits: asked only when the cached counts say every
    # document is accounted for, or after a cancel, so a healthy pass never lists a running job.
    if (ledger.cancel_requested() or _counted_all(job)) and ready_to_finalize(ledger, ctx.leases):
        if lost(FINALIZE_UNIT):
            dispatch_finalize(job)
            report.resent.append(f"{job.id}/{FINALIZE_UNIT}")
        return
    if ledger.cancel_requested():
        return  # running shards stop on their own; the last one to stop sends the finalizer
    plan = ledger.plan()
    if plan is None:
        if lost(PLAN_UNIT):
            dispatch_plan(job)
            report.resent.append(f"{job.id}/{PLAN_UNIT}")
        return
    if ctx.status.field(job.id, "num_shards") is None:  # the planner wrote the plan, then lost Redis
        record_plan(job, plan)
    # Only the shards in flight are looked at: a pass costs O(workers), whatever the job's size. A
    # lost shard that was committed meanwhile is counted by its re-sent task, at no model cost.
    missing = [shard for shard in ctx.fair.in_flight(job.id) if lost(shard_unit(shard))]
    if missing:
        dispatch_shards(job, missing)
        report.resent += [f"{job.id}/{shard_unit(shard)}" for shard in missing]
    # A job that Redis lost joins fair share again (from shard 0; committed shards cost no work).
    refilled = open_shards(job, plan)
    report.resent += [f"{claim.job_id}/{shard_unit(claim.shard)}" for claim in refilled]
