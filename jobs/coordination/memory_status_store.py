"""The job status cache in memory: the cheap in-process implementation (tests, ``poolq embed``)."""
from __future__ import annotations

import threading
from datetime import datetime

from poolq.jobs.coordination.status_store import (
    ERROR_FIELD,
    PROGRESS_FIELD,
    RESERVATION_GRACE_S,
    SAMPLES_FIELD,
    TERMINAL_STATES,
    JobStatusStore,
    UnitCounts,
    error_fields,
    flatten_status,
    plain_fields,
    samples_field,
)
from poolq.jobs.ledger.error_summary import ErrorSummary
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobStatus


class InMemoryJobStatusStore(JobStatusStore):
    """For in-process runs (``poolq embed``) and unit tests."""

    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, str]] = {}
        self._units: dict[str, set[str]] = {}
        self._dispatches: dict[str, dict[str, float]] = {}
        self._active: dict[str, set[str]] = {}
        self._reserved_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def note_dispatch(self, job_id: str, units: list[str], at: float) -> None:
        with self._lock:
            self._dispatches.setdefault(job_id, {}).update({unit: at for unit in units})

    def dispatches(self, job_id: str) -> dict[str, float]:
        with self._lock:
            return dict(self._dispatches.get(job_id, {}))

    def drop_dispatch(self, job_id: str, unit: str) -> None:
        with self._lock:
            self._dispatches.get(job_id, {}).pop(unit, None)

    def forget(self, job_id: str) -> None:
        with self._lock:
            self._dispatches.pop(job_id, None)

    def expire(self, job_id: str, ttl_s: float) -> None:
        """Nothing outlives the process here: finished jobs stay readable for its lifetime."""
        with self._lock:
            self._units.pop(job_id, None)

    def add_active(self, tenant: str, job_id: str) -> None:
        with self._lock:
            self._active.setdefault(tenant, set()).add(job_id)

    def reserve_active(self, tenant: str, job_id: str, cap: int, now: float) -> int | None:
        with self._lock:
            members = self._active.setdefault(tenant, set())
            if job_id in members:
                return None
            for member in list(members):
                state = self._jobs.get(member, {}).get("status")
                stale = state is None and now - self._reserved_at.get(member, 0.0) > RESERVATION_GRACE_S
                if state in TERMINAL_STATES or stale:
                    members.discard(member)
                    self._reserved_at.pop(member, None)
            if len(members) >= cap:
                return len(members)
            members.add(job_id)
            self._reserved_at[job_id] = now
            return None

    def remove_active(self, tenant: str, job_id: str) -> None:
        with self._lock:
            self._active.get(tenant, set()).discard(job_id)
            self._reserved_at.pop(job_id, None)

    def active_ids(self, tenant: str) -> list[str]:
        with self._lock:
            return sorted(self._active.get(tenant, ()))

    def all_active_ids(self) -> list[str]:
        with self._lock:
            return sorted(set().union(*self._active.values()))

    def create(self, status: JobStatus) -> bool:
        with self._lock:
            # Like Redis: a record holding only counters (counted after it was lost) has no status yet.
            if "status" in self._jobs.get(status.id, {}):
                return False
            self._jobs.setdefault(status.id, {}).update(flatten_status(status))
            return True

    def _read(self, job_id: str) -> dict[str, str] | None:
        with self._lock:
            return dict(self._jobs[job_id]) if job_id in self._jobs else None

    def update(self, job_id: str, **fields: str | int | datetime) -> None:
        with self._lock:
            self._jobs.setdefault(job_id, {}).update(plain_fields(fields))

    def transition(self, job_id: str, target: JobState, **fields: str | int | datetime) -> bool:
        with self._lock:
            record = self._jobs.get(job_id)
            if record is None or "status" not in record or not JobState(record["status"]).can_become(target):
                return False
            record.update(plain_fields(fields), status=target.value)
            return True

    def count_unit(self, job_id: str, unit: str, counts: UnitCounts, errors: ErrorSummary | None = None) -> int:
        with self._lock:
            units = self._units.setdefault(job_id, set())
            record = self._jobs.setdefault(job_id, {})
            if unit not in units:
                units.add(unit)
                for name, amount in counts.counters().items():
                    record[name] = str(int(record.get(name, 0)) + amount)
                for name, count in error_fields(errors).items():
                    record[name] = str(int(record.get(name, 0)) + int(count))
                if samples_field(errors):
                    record.setdefault(SAMPLES_FIELD, samples_field(errors))
            record.pop(PROGRESS_FIELD + unit, None)
            return len(units)

    def note_progress(self, job_id: str, unit: str, documents: int, tokens: int, planned_tokens: int = 0,
                      planned_chars: int = 0) -> None:
        with self._lock:
            record = self._jobs.get(job_id)
            if record is not None and "status" in record and unit not in self._units.get(job_id, set()):
                record[PROGRESS_FIELD + unit] = f"{documents},{tokens},{planned_tokens},{planned_chars}"

    def set_counts(self, job_id: str, units: list[str], counts: UnitCounts, errors: ErrorSummary | None = None) -> None:
        with self._lock:
            self._units[job_id] = set(units)
            record = self._jobs.setdefault(job_id, {})
            for name in [name for name in record if name.startswith((ERROR_FIELD, PROGRESS_FIELD, SAMPLES_FIELD))]:
                del record[name]
            record.update({name: str(value) for name, value in counts.counters().items()}, **error_fields(errors))
            if samples_field(errors):
                record[SAMPLES_FIELD] = samples_field(errors)
