"""Running a schedule: one job per (schedule, slot), however often the slot is triggered.

Beat sends ``poolq.run_schedule`` at each cron time; two beats, a redelivered message or a
click on "run now" in the same second all land on the same slot. The slot's run record is
claimed first (create-if-absent) with the run it carries documents from, so every racer
submits the very same job body under the same idempotency key, hence the same job.
"""
from __future__ import annotations

import logging
from datetime import datetime, timezone

from pydantic import BaseModel

from poolq.jobs.context import JobContext
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.planning.incremental import USABLE_STATES
from poolq.jobs.spec.dict_access import DictAccessDeprecated
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.status.current_status import status_from_ledger
from poolq.jobs.steps.submit import submit_job
from poolq.products.schedules.schedule import ScheduleRun, manual_slot
from poolq.products.schedules.schedule_store import ScheduleStore

log = logging.getLogger(__name__)

MAX_RUNS_KEPT = 100  # run records per schedule; older ones are deleted (their jobs stay)


class RunView(DictAccessDeprecated, BaseModel):
    """One run of a schedule as the API shows it."""

    slot: datetime
    job_id: str | None
    status: JobState | None
    incremental_from: str | None
    manual: bool


def run_schedule(ctx: JobContext, schedule_id: str, now: datetime | None = None, *, manual: bool = False) -> ScheduleRun | None:
    """Submit the job of the slot ``now`` falls in, unless that slot has one; returns the slot's run.

    ``manual``: a run by hand, whose slot is ``now`` to the second (and which runs even if the
    schedule is disabled). None if the schedule does not exist (or is disabled).
    """
    store = ScheduleStore(ctx.store, ctx.service_layout)
    schedule = store.get(schedule_id)
    if schedule is None or not (manual or schedule.enabled):
        log.info("schedule %s: %s; nothing to run", schedule_id, "disabled" if schedule else "no such schedule")
        return None
    now = now or datetime.now(timezone.utc)
    slot = manual_slot(now) if manual else schedule.slot_at(now)
    run = store.run(schedule_id, slot)
    if run is not None and run.job_id is not None:
        return run  # a duplicate trigger of a slot that has its job
    if run is None:
        baseline = last_good_job(ctx, schedule_id, slot, store)
        run = store.claim_run(ScheduleRun(schedule_id=schedule_id, slot=slot, incremental_from=baseline, manual=manual))
    job = submit_job(
        ctx, schedule.job_spec(run.incremental_from), idempotency_key=run.idempotency_key, tenant=schedule.tenant
    )
    run = store.record_job(run, job.id)
    store.prune_runs(schedule_id, MAX_RUNS_KEPT)
    log.info("schedule %s slot %s: job %s (incremental from %s)", schedule_id, run.slot_name, job.id, run.incremental_from)
    return run


def last_good_job(ctx: JobContext, schedule_id: str, before: datetime, store: ScheduleStore) -> str | None:
    """The job of the newest run before slot ``before`` that finished succeeded or partially succeeded."""
    for run in store.iter_runs(schedule_id):
        if run.slot >= before or run.job_id is None:
            continue
        manifest = JobHandle.bind(ctx, run.job_id).ledger.manifest()
        if manifest is not None and manifest.status in USABLE_STATES:
            return run.job_id
    return None


def run_view(ctx: JobContext, run: ScheduleRun) -> RunView:
    """``run`` with its job's current state (from the status cache, else the ledger)."""
    status = None
    if run.job_id is not None:
        job = ctx.status.get(run.job_id) or status_from_ledger(JobHandle.bind(ctx, run.job_id))
        status = job.status if job is not None else None
    return RunView(slot=run.slot, job_id=run.job_id, status=status, incremental_from=run.incremental_from, manual=run.manual)


def recent_runs(ctx: JobContext, schedule_id: str, limit: int = 20) -> list[RunView]:
    """The schedule's newest runs, newest first, with their jobs' states."""
    store = ScheduleStore(ctx.store, ctx.service_layout)
    return [run_view(ctx, run) for run in store.runs(schedule_id, limit)]
