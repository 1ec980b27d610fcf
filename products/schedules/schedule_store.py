"""Schedules and their run records, kept in the object store (the durable truth; RedBeat's
entries in Redis are derived from it and rebuilt by the reconciler)."""
from __future__ import annotations

import builtins
import json
from datetime import datetime
from itertools import islice
from typing import Iterator

from poolq.jobs.ledger.layout import ServiceLayout
from poolq.products.schedules.schedule import Schedule, ScheduleRun, slot_name
from poolq.storage import ObjectExistsError, ObjectNotFoundError, ObjectStore


class ScheduleStore:
    """``<prefix>/_schedules/<id>.json`` and ``<prefix>/_schedule_runs/<id>/<slot>.json``."""

    def __init__(self, store: ObjectStore, layout: ServiceLayout) -> None:
        self.store = store
        self.layout = layout

    # -- schedules -----------------------------------------------------------------------
    def create(self, schedule: Schedule) -> None:
        """Write a new schedule (``ObjectExistsError`` if its id is taken)."""
        self.store.put(self.layout.schedule(schedule.id), schedule.model_dump_json(indent=2).encode(), if_absent=True)

    def get(self, schedule_id: str) -> Schedule | None:
        try:
            return Schedule.model_validate_json(self.store.get(self.layout.schedule(schedule_id)))
        except ObjectNotFoundError:
            return None

    def ids(self) -> list[str]:
        prefix = self.layout.schedules_prefix
        return [key[len(prefix):-len(".json")] for key in self.store.list(prefix) if key.endswith(".json")]

    def list(self) -> list[Schedule]:
        """Every stored schedule, by id."""
        return [schedule for schedule in map(self.get, self.ids()) if schedule is not None]

    def delete(self, schedule_id: str) -> bool:
        """Remove the schedule and its run records; False if there was no such schedule."""
        key = self.layout.schedule(schedule_id)
        if not self.store.exists(key):
            return False
        self.store.delete(key)
        for run_key in list(self.store.list(self.layout.schedule_runs_prefix(schedule_id))):
            self.store.delete(run_key)
        return True

    # -- runs ------------------------------------------------------------------------------
    def run(self, schedule_id: str, slot: datetime) -> ScheduleRun | None:
        return self._read_run(self.layout.schedule_run(schedule_id, slot_name(slot)))

    def claim_run(self, run: ScheduleRun) -> ScheduleRun:
        """Record ``run`` for its slot unless one is there; returns the slot's run either way."""
        key = self.layout.schedule_run(run.schedule_id, run.slot_name)
        try:
            self.store.put(key, run.model_dump_json(indent=2).encode(), if_absent=True)
            return run
        except ObjectExistsError:
            existing = self._read_run(key)
        if existing is None:  # pragma: no cover - written a moment ago, only a delete removes it
            raise ObjectNotFoundError(f"{self.store.uri(key)} vanished")
        return existing

    def record_job(self, run: ScheduleRun, job_id: str) -> ScheduleRun:
        """Note the slot's job. Unconditional: every racer holds the same claim, hence the same job."""
        done = run.model_copy(update={"job_id": job_id})
        self.store.put(self.layout.schedule_run(run.schedule_id, run.slot_name), done.model_dump_json(indent=2).encode())
        return done

    def iter_runs(self, schedule_id: str) -> Iterator[ScheduleRun]:
        """The schedule's run records, newest slot first, read one at a time."""
        for key in sorted(self.store.list(self.layout.schedule_runs_prefix(schedule_id)), reverse=True):
            run = self._read_run(key)
            if run is not None:
                yield run

    # builtins.list: in the class body, ``list`` is the method above.
    def runs(self, schedule_id: str, limit: int | None = None) -> builtins.list[ScheduleRun]:
        """The newest ``limit`` run records (all of them: their number is bounded by :meth:`prune_runs`)."""
        return list(islice(self.iter_runs(schedule_id), limit))

    def prune_runs(self, schedule_id: str, keep: int) -> int:
        """Delete all but the newest ``keep`` run records; returns how many went."""
        keys = list(self.store.list(self.layout.schedule_runs_prefix(schedule_id)))
        old = keys[: max(0, len(keys) - keep)]
        for key in old:
            self.store.delete(key)
        return len(old)

    def _read_run(self, key: str) -> ScheduleRun | None:
        try:
            return ScheduleRun.model_validate(json.loads(self.store.get(key)))
        except ObjectNotFoundError:
            return None
