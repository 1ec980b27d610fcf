"""Catching up a slot that beat missed: RedBeat down over a cron time, or its entry rebuilt
after Redis lost its data (a rebuilt entry counts from the rebuild, so the slot before it would
never fire).

The reconciler's pass runs, for each enabled schedule, its latest slot when that slot is old
enough that beat would have fired it (``GRACE``) and still has no run record. Only the latest
slot: a reindex brings the outputs up to date with the input as it is now, so replaying every
slot of an outage would redo the same work. Running a slot is idempotent (``run_schedule``), so
a catch-up racing a late beat still gives one job.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

from poolq.jobs.context import JobContext
from poolq.products.schedules.schedule import Schedule
from poolq.products.schedules.schedule_runner import run_schedule
from poolq.products.schedules.schedule_store import ScheduleStore

log = logging.getLogger(__name__)

# Beat fires a slot within seconds of its cron time; a slot without a run after this was missed.
GRACE = timedelta(minutes=2)


def missed_slot(schedule: Schedule, store: ScheduleStore, now: datetime) -> datetime | None:
    """The schedule's latest slot if beat has missed it, else None."""
    if not schedule.enabled:
        return None
    slot = schedule.slot_at(now)
    if slot < schedule.created_at or now - slot < GRACE:
        return None  # before the schedule existed, or beat may still be about to fire it
    return slot if store.run(schedule.id, slot) is None else None


def catch_up_missed_slots(ctx: JobContext, now: datetime, schedules: list[Schedule] | None = None) -> list[str]:
    """Run every schedule's missed latest slot; returns the ids of the schedules run. Never raises.

    ``schedules``: the stored ones if the caller has just read them (the beat sync did), else read here."""
    store = ScheduleStore(ctx.store, ctx.service_layout)
    caught_up: list[str] = []
    try:
        schedules = store.list() if schedules is None else schedules
    except Exception:  # noqa: BLE001 - schedules must not stop the pass over the jobs
        log.exception("listing schedules to catch up missed slots failed")
        return caught_up
    for schedule in schedules:
        try:
            slot = missed_slot(schedule, store, now)
            if slot is not None and run_schedule(ctx, schedule.id, now) is not None:
                log.warning("schedule %s: slot %s was missed; ran it now", schedule.id, slot.isoformat())
                caught_up.append(schedule.id)
        except Exception:  # noqa: BLE001 - one schedule must not stop the others
            log.exception("catching up schedule %s failed", schedule.id)
    return caught_up
