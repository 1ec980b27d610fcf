"""RedBeat entries for stored schedules: one ``poolq-schedule-<id>`` entry per schedule.

The object store holds the schedules; Redis holds only these derived entries. Creating or
deleting a schedule adds or removes its entry, and every reconciler pass re-syncs them (adds
missing entries, e.g. after Redis lost its data, and removes entries of deleted schedules).
Entries, like schedules, never change once written: an existing entry is left alone.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from celery import Celery
from redbeat import RedBeatSchedulerEntry
from redbeat.schedulers import ensure_conf, get_redis

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, SCHEDULE_TASK, CeleryEnqueuer
from poolq.products.schedules.schedule import Schedule, to_crontab
from poolq.products.schedules.schedule_store import ScheduleStore

log = logging.getLogger(__name__)

ENTRY_PREFIX = "poolq-schedule-"


def entry_name(schedule_id: str) -> str:
    return f"{ENTRY_PREFIX}{schedule_id}"


@dataclass
class BeatSync:
    """What one sync changed, by schedule id, and the stored schedules it read."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    schedules: list[Schedule] = field(default_factory=list)


class ScheduleBeat:
    """The RedBeat entries of one Celery app (its ``redbeat_*`` settings say where they live)."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def add(self, schedule: Schedule) -> None:
        """Save the schedule's entry; it first fires at the next cron time, not at once."""
        entry = RedBeatSchedulerEntry(
            entry_name(schedule.id), SCHEDULE_TASK, to_crontab(schedule.cron), args=[schedule.id],
            options={"queue": CONTROL_QUEUE}, enabled=schedule.enabled, app=self.app,
        )
        entry.save()  # last_run_at defaults to now: RedBeat would otherwise fire a new entry at once

    def remove(self, schedule_id: str) -> None:
        RedBeatSchedulerEntry(entry_name(schedule_id), app=self.app).delete()

    def schedule_ids(self) -> set[str]:
        """Ids of the schedules that have an entry."""
        prefix = ensure_conf(self.app).key_prefix + ENTRY_PREFIX
        return {key[len(prefix):] for key in get_redis(self.app).scan_iter(match=f"{prefix}*", count=500)}

    def sync(self, store: ScheduleStore) -> BeatSync:
        """Make the entries match the stored schedules: add the missing ones, remove the orphans.

        Entries are read before schedules: a schedule created or deleted meanwhile is then at
        worst added twice or removed twice (both harmless), never left without its entry.
        """
        present = self.schedule_ids()
        schedules = store.list()
        report = BeatSync(schedules=schedules)
        for schedule in schedules:
            if schedule.id not in present:
                self.add(schedule)
                report.added.append(schedule.id)
        for orphan in sorted(present - {schedule.id for schedule in schedules}):
            self.remove(orphan)
            report.removed.append(orphan)
        return report


def beat_for(ctx: JobContext) -> ScheduleBeat | None:
    """The beat entries of a context that sends work through Celery; None in process (nothing
    fires on its own there: runs are triggered by hand)."""
    if isinstance(ctx.enqueuer, CeleryEnqueuer):
        return ScheduleBeat(ctx.enqueuer.app)
    return None


def sync_beat_entries(ctx: JobContext) -> BeatSync | None:
    """The reconciler's step: re-sync RedBeat entries from the stored schedules. Never raises."""
    beat = beat_for(ctx)
    if beat is None:
        return None
    try:
        report = beat.sync(ScheduleStore(ctx.store, ctx.service_layout))
    except Exception:  # noqa: BLE001 - schedules must not stop the pass over the jobs
        log.exception("syncing schedule entries with RedBeat failed")
        return None
    if report.added or report.removed:
        log.info("schedule entries: added %s, removed %s", report.added, report.removed)
    return report
