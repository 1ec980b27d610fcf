"""Where job status and progress counters live: Redis, or memory for in-process runs.

[F4] makes the object store the ledger; this store then holds only fast counters.
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from datetime import datetime

from .job import JobCounts, JobResult, JobState, JobStatus, JobUsage

# Fields that are plain values (strings, timestamps); counters are kept apart.
_COUNTERS = ("completed", "failed", "tokens", "shards_done")


class JobStatusStore(ABC):
    """Job status records and their progress counters."""

    @abstractmethod
    def create(self, status: JobStatus) -> None: ...

    @abstractmethod
    def _read(self, job_id: str) -> dict[str, str] | None:
        """All fields of the job as strings, or None."""

    @abstractmethod
    def update(self, job_id: str, **fields: str | int | datetime) -> None:
        """Set plain fields (status, started_at, total, num_shards, manifest_uri, error, ...)."""

    @abstractmethod
    def add(self, job_id: str, counter: str, amount: int) -> int:
        """Atomically add to a counter; returns the new value."""

    def add_progress(self, job_id: str, *, completed: int = 0, failed: int = 0, tokens: int = 0) -> None:
        for counter, amount in (("completed", completed), ("failed", failed), ("tokens", tokens)):
            if amount:
                self.add(job_id, counter, amount)

    def get(self, job_id: str) -> JobStatus | None:
        fields = self._read(job_id)
        if not fields:
            return None
        total = fields.get("total")
        manifest_uri = fields.get("manifest_uri")
        return JobStatus(
            id=job_id,
            status=JobState(fields["status"]),
            model=fields["model"],
            task=fields["task"],
            counts=JobCounts(
                total=int(total) if total else None,
                completed=int(fields.get("completed", 0)),
                failed=int(fields.get("failed", 0)),
            ),
            usage=JobUsage(tokens=int(fields.get("tokens", 0))),
            created_at=fields["created_at"],
            started_at=fields.get("started_at") or None,
            finished_at=fields.get("finished_at") or None,
            result=JobResult(manifest_uri=manifest_uri) if manifest_uri else None,
            error=fields.get("error") or None,
        )

    def field(self, job_id: str, name: str) -> str | None:
        return (self._read(job_id) or {}).get(name)


def _flatten(status: JobStatus) -> dict[str, str]:
    fields = {
        "status": status.status.value,
        "model": status.model,
        "task": status.task,
        "created_at": status.created_at.isoformat(),
    }
    return fields


def _as_str(value: str | int | datetime) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, JobState):
        return value.value
    return str(value)


class RedisJobStatusStore(JobStatusStore):
    """One Redis hash per job: ``poolq:job:<id>``."""

    def __init__(self, redis_client) -> None:
        self.redis = redis_client

    @staticmethod
    def _key(job_id: str) -> str:
        return f"poolq:job:{job_id}"

    def create(self, status: JobStatus) -> None:
        self.redis.hset(self._key(status.id), mapping=_flatten(status))

    def _read(self, job_id: str) -> dict[str, str] | None:
        raw = self.redis.hgetall(self._key(job_id))
        return {k.decode(): v.decode() for k, v in raw.items()} if raw else None

    def update(self, job_id: str, **fields: str | int | datetime) -> None:
        self.redis.hset(self._key(job_id), mapping={k: _as_str(v) for k, v in fields.items()})

    def add(self, job_id: str, counter: str, amount: int) -> int:
        if counter not in _COUNTERS:
            raise ValueError(f"unknown counter {counter!r}")
        return int(self.redis.hincrby(self._key(job_id), counter, amount))


class InMemoryJobStatusStore(JobStatusStore):
    """For in-process runs (``poolq embed``) and unit tests."""

    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def create(self, status: JobStatus) -> None:
        with self._lock:
            self._jobs[status.id] = _flatten(status)

    def _read(self, job_id: str) -> dict[str, str] | None:
        with self._lock:
            return dict(self._jobs[job_id]) if job_id in self._jobs else None

    def update(self, job_id: str, **fields: str | int | datetime) -> None:
        with self._lock:
            self._jobs[job_id].update({k: _as_str(v) for k, v in fields.items()})

    def add(self, job_id: str, counter: str, amount: int) -> int:
        if counter not in _COUNTERS:
            raise ValueError(f"unknown counter {counter!r}")
        with self._lock:
            value = int(self._jobs[job_id].get(counter, 0)) + amount
            self._jobs[job_id][counter] = str(value)
            return value
