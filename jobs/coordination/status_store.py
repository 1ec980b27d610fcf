"""Job status and progress counters: a fast cache of the ledger, in Redis or in memory.

Everything here can be rebuilt from the object store (see ``recovery.py``). State changes are
compare-and-set against ``TRANSITIONS``; counters are idempotent per unit of work, so a
redelivered or repeated commit never counts twice.
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from datetime import datetime

from poolq.jobs.job import LOCAL_TENANT, TRANSITIONS, JobCounts, JobResult, JobState, JobStatus, JobUsage

_COUNTERS = ("completed", "failed", "tokens")


class JobStatusStore(ABC):
    """Job status records, their state machine and their progress counters."""

    @abstractmethod
    def create(self, status: JobStatus) -> bool:
        """Create the record unless one exists; True if this call created it."""

    @abstractmethod
    def _read(self, job_id: str) -> dict[str, str] | None:
        """All fields of the job as strings, or None."""

    @abstractmethod
    def update(self, job_id: str, **fields: str | int | datetime) -> None:
        """Set plain fields (started_at, total, num_shards, manifest_uri, error, ...); never ``status``."""

    @abstractmethod
    def transition(self, job_id: str, target: JobState, **fields: str | int | datetime) -> bool:
        """Move to ``target`` if the current state allows it (and set ``fields``); False otherwise."""

    @abstractmethod
    def count_unit(self, job_id: str, unit: str, *, completed: int = 0, failed: int = 0, tokens: int = 0) -> int:
        """Add a finished unit's counts once, however often it is reported; returns units counted."""

    @abstractmethod
    def set_counts(self, job_id: str, units: list[str], *, completed: int, failed: int, tokens: int) -> None:
        """Overwrite the counters with totals read from the ledger (recovery, finalization)."""

    @abstractmethod
    def note_dispatch(self, job_id: str, units: list[str], at: float) -> None:
        """Record when tasks for ``units`` were last sent (the reconciler re-sends lost ones)."""

    @abstractmethod
    def dispatches(self, job_id: str) -> dict[str, float]:
        """Unit -> when its task was last sent."""

    @abstractmethod
    def forget(self, job_id: str) -> None:
        """Drop the job's bookkeeping that only matters while it runs (dispatch times)."""

    @abstractmethod
    def add_active(self, tenant: str, job_id: str) -> None:
        """Count ``job_id`` against its tenant's cap on unfinished jobs."""

    @abstractmethod
    def remove_active(self, tenant: str, job_id: str) -> None: ...

    @abstractmethod
    def active_ids(self, tenant: str) -> list[str]: ...

    @abstractmethod
    def all_active_ids(self) -> list[str]:
        """Every tenant's active jobs (for the metrics' unfinished-jobs gauge)."""

    def advance_to(self, job_id: str, target: JobState, **fields: str | int | datetime) -> bool:
        """Walk the state machine to ``target`` (through running or cancelling if needed).

        Used when the ledger already decided the outcome (a manifest exists) but the cached
        state lags behind, e.g. after Redis lost it. Terminal states are never left.
        """
        for _ in range(len(TRANSITIONS)):
            current = self.get(job_id)
            if current is None or current.status.is_terminal or current.status == target:
                return current is not None and current.status == target
            if current.status.can_become(target):
                if self.transition(job_id, target, **fields):
                    return True
                continue  # lost a race: look again
            step = next(
                (via for via in (JobState.RUNNING, JobState.CANCELLING)
                 if current.status.can_become(via) and via.can_become(target)),
                None,
            )
            if step is None:
                return False
            self.transition(job_id, step)
        return False

    def get(self, job_id: str) -> JobStatus | None:
        fields = self._read(job_id)
        if not fields or "status" not in fields:
            return None
        total = fields.get("total")
        manifest_uri = fields.get("manifest_uri")
        return JobStatus(
            id=job_id,
            tenant=fields.get("tenant", LOCAL_TENANT),
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
        "tenant": status.tenant,
        "model": status.model,
        "task": status.task,
        "created_at": status.created_at.isoformat(),
    }
    for name, value in (("started_at", status.started_at), ("finished_at", status.finished_at)):
        if value is not None:
            fields[name] = value.isoformat()
    if status.counts.total is not None:
        fields["total"] = str(status.counts.total)
    if status.result is not None:
        fields["manifest_uri"] = status.result.manifest_uri
    if status.error:
        fields["error"] = status.error
    return fields


def _as_str(value: str | int | datetime) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, JobState):
        return value.value
    return str(value)


def _plain(fields: dict) -> dict[str, str]:
    if "status" in fields:
        raise ValueError("status changes go through transition()")
    return {name: _as_str(value) for name, value in fields.items()}


# KEYS[1] job hash; ARGV[1] target; ARGV[2] allowed sources (comma-separated); ARGV[3..] field/value pairs.
_TRANSITION_LUA = """
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return 0 end
local allowed = ',' .. ARGV[2] .. ','
if not string.find(allowed, ',' .. current .. ',', 1, true) then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
"""
# KEYS[1] job hash; ARGV field/value pairs. Creates the record only if it has no status yet.
_CREATE_LUA = """
if redis.call('HEXISTS', KEYS[1], 'status') == 1 then return 0 end
for i = 1, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
"""
# KEYS[1] job hash, KEYS[2] counted-units set; ARGV[1] unit, ARGV[2..4] completed, failed, tokens.
_COUNT_LUA = """
if redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'completed', ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'failed', ARGV[3])
  redis.call('HINCRBY', KEYS[1], 'tokens', ARGV[4])
end
return redis.call('SCARD', KEYS[2])
"""


def _sources(target: JobState) -> list[str]:
    return [state.value for state, targets in TRANSITIONS.items() if target in targets]


class RedisJobStatusStore(JobStatusStore):
    """One hash per job (``poolq:job:<id>``) and a set of the units it has counted."""

    def __init__(self, redis_client) -> None:
        self.redis = redis_client
        self._transition = redis_client.register_script(_TRANSITION_LUA)
        self._count = redis_client.register_script(_COUNT_LUA)
        self._create = redis_client.register_script(_CREATE_LUA)

    @staticmethod
    def _key(job_id: str) -> str:
        return f"poolq:job:{job_id}"

    @staticmethod
    def _units_key(job_id: str) -> str:
        return f"poolq:job:{job_id}:units"

    def create(self, status: JobStatus) -> bool:
        pairs = [item for name, value in _flatten(status).items() for item in (name, value)]
        return bool(self._create(keys=[self._key(status.id)], args=pairs))

    def _read(self, job_id: str) -> dict[str, str] | None:
        raw = self.redis.hgetall(self._key(job_id))
        return {k.decode(): v.decode() for k, v in raw.items()} if raw else None

    def update(self, job_id: str, **fields: str | int | datetime) -> None:
        self.redis.hset(self._key(job_id), mapping=_plain(fields))

    def transition(self, job_id: str, target: JobState, **fields: str | int | datetime) -> bool:
        pairs = [item for name, value in _plain(fields).items() for item in (name, value)]
        args = [target.value, ",".join(_sources(target)), *pairs]
        return bool(self._transition(keys=[self._key(job_id)], args=args))

    def count_unit(self, job_id: str, unit: str, *, completed: int = 0, failed: int = 0, tokens: int = 0) -> int:
        keys = [self._key(job_id), self._units_key(job_id)]
        return int(self._count(keys=keys, args=[unit, completed, failed, tokens]))

    def note_dispatch(self, job_id: str, units: list[str], at: float) -> None:
        if units:
            self.redis.hset(f"poolq:job:{job_id}:dispatch", mapping={unit: at for unit in units})

    def dispatches(self, job_id: str) -> dict[str, float]:
        raw = self.redis.hgetall(f"poolq:job:{job_id}:dispatch")
        return {unit.decode(): float(at) for unit, at in raw.items()}

    def forget(self, job_id: str) -> None:
        self.redis.delete(f"poolq:job:{job_id}:dispatch")

    _ALL_ACTIVE_KEY = "poolq:active"  # every tenant's active jobs, kept with the per-tenant sets

    def add_active(self, tenant: str, job_id: str) -> None:
        self.redis.pipeline().sadd(f"poolq:tenant:{tenant}:active", job_id).sadd(self._ALL_ACTIVE_KEY, job_id).execute()

    def remove_active(self, tenant: str, job_id: str) -> None:
        self.redis.pipeline().srem(f"poolq:tenant:{tenant}:active", job_id).srem(self._ALL_ACTIVE_KEY, job_id).execute()

    def active_ids(self, tenant: str) -> list[str]:
        return sorted(member.decode() for member in self.redis.smembers(f"poolq:tenant:{tenant}:active"))

    def all_active_ids(self) -> list[str]:
        return sorted(member.decode() for member in self.redis.smembers(self._ALL_ACTIVE_KEY))

    def set_counts(self, job_id: str, units: list[str], *, completed: int, failed: int, tokens: int) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self._key(job_id), mapping={"completed": completed, "failed": failed, "tokens": tokens})
        pipe.delete(self._units_key(job_id))
        if units:
            pipe.sadd(self._units_key(job_id), *units)
        pipe.execute()


class InMemoryJobStatusStore(JobStatusStore):
    """For in-process runs (``poolq embed``) and unit tests."""

    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, str]] = {}
        self._units: dict[str, set[str]] = {}
        self._dispatches: dict[str, dict[str, float]] = {}
        self._active: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def note_dispatch(self, job_id: str, units: list[str], at: float) -> None:
        with self._lock:
            self._dispatches.setdefault(job_id, {}).update({unit: at for unit in units})

    def dispatches(self, job_id: str) -> dict[str, float]:
        with self._lock:
            return dict(self._dispatches.get(job_id, {}))

    def forget(self, job_id: str) -> None:
        with self._lock:
            self._dispatches.pop(job_id, None)

    def add_active(self, tenant: str, job_id: str) -> None:
        with self._lock:
            self._active.setdefault(tenant, set()).add(job_id)

    def remove_active(self, tenant: str, job_id: str) -> None:
        with self._lock:
            self._active.get(tenant, set()).discard(job_id)

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
            self._jobs.setdefault(status.id, {}).update(_flatten(status))
            return True

    def _read(self, job_id: str) -> dict[str, str] | None:
        with self._lock:
            return dict(self._jobs[job_id]) if job_id in self._jobs else None

    def update(self, job_id: str, **fields: str | int | datetime) -> None:
        with self._lock:
            self._jobs.setdefault(job_id, {}).update(_plain(fields))

    def transition(self, job_id: str, target: JobState, **fields: str | int | datetime) -> bool:
        with self._lock:
            record = self._jobs.get(job_id)
            if record is None or "status" not in record or not JobState(record["status"]).can_become(target):
                return False
            record.update(_plain(fields), status=target.value)
            return True

    def count_unit(self, job_id: str, unit: str, *, completed: int = 0, failed: int = 0, tokens: int = 0) -> int:
        with self._lock:
            units = self._units.setdefault(job_id, set())
            if unit not in units:
                units.add(unit)
                record = self._jobs.setdefault(job_id, {})
                for name, amount in zip(_COUNTERS, (completed, failed, tokens)):
                    record[name] = str(int(record.get(name, 0)) + amount)
            return len(units)

    def set_counts(self, job_id: str, units: list[str], *, completed: int, failed: int, tokens: int) -> None:
        with self._lock:
            self._units[job_id] = set(units)
            self._jobs.setdefault(job_id, {}).update(completed=str(completed), failed=str(failed), tokens=str(tokens))
