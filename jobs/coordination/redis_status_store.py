"""The job status cache in Redis: one hash per job, compare-and-set state changes in Lua,
idempotent per-unit counters. Shared by every API and worker process."""
from __future__ import annotations

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
from poolq.jobs.spec.job_state import TRANSITIONS, JobState
from poolq.jobs.spec.job_status import JobStatus

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
# KEYS[1] job hash, KEYS[2] counted-units set; ARGV[1] unit, ARGV[2] the error samples (JSON, ''
# for none), ARGV[3..] field/increment pairs (the counters, then the errors by code).
_COUNT_LUA = """
if redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
  if ARGV[2] ~= '' then redis.call('HSETNX', KEYS[1], 'error_samples', ARGV[2]) end
  for i = 3, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
redis.call('HDEL', KEYS[1], 'progress:' .. ARGV[1])
return redis.call('SCARD', KEYS[2])
"""
# KEYS[1] job hash, KEYS[2] counted-units set; ARGV[1] unit, ARGV[2] "documents,tokens,planned_tokens,planned_chars".
_PROGRESS_LUA = """
if redis.call('HEXISTS', KEYS[1], 'status') == 0 or redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'progress:' .. ARGV[1], ARGV[2])
return 1
"""


# KEYS[1] tenant's active set, KEYS[2] all-active set, KEYS[3] tenant's reservation times (hash);
# ARGV[1] job id, ARGV[2] cap, ARGV[3] now, ARGV[4] grace seconds, ARGV[5..] terminal states.
# Returns -1 when reserved, else the number of unfinished jobs.
_RESERVE_LUA = """
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return -1 end
local terminal = {}
for i = 5, #ARGV do terminal[ARGV[i]] = true end
local now, grace = tonumber(ARGV[3]), tonumber(ARGV[4])
local active = 0
for _, member in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local state = redis.call('HGET', 'poolq:job:' .. member, 'status')
  local reserved = tonumber(redis.call('HGET', KEYS[3], member) or '0')
  if (state and terminal[state]) or (not state and now - reserved > grace) then
    redis.call('SREM', KEYS[1], member); redis.call('SREM', KEYS[2], member); redis.call('HDEL', KEYS[3], member)
  else
    active = active + 1
  end
end
if active >= tonumber(ARGV[2]) then return active end
redis.call('SADD', KEYS[1], ARGV[1]); redis.call('SADD', KEYS[2], ARGV[1]); redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return -1
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
        self._reserve = redis_client.register_script(_RESERVE_LUA)
        self._progress = redis_client.register_script(_PROGRESS_LUA)

    @staticmethod
    def _key(job_id: str) -> str:
        return f"poolq:job:{job_id}"

    @staticmethod
    def _units_key(job_id: str) -> str:
        return f"poolq:job:{job_id}:units"

    def create(self, status: JobStatus) -> bool:
        pairs = [item for name, value in flatten_status(status).items() for item in (name, value)]
        return bool(self._create(keys=[self._key(status.id)], args=pairs))

    def _read(self, job_id: str) -> dict[str, str] | None:
        raw = self.redis.hgetall(self._key(job_id))
        return {k.decode(): v.decode() for k, v in raw.items()} if raw else None

    def update(self, job_id: str, **fields: str | int | datetime) -> None:
        self.redis.hset(self._key(job_id), mapping=plain_fields(fields))

    def transition(self, job_id: str, target: JobState, **fields: str | int | datetime) -> bool:
        pairs = [item for name, value in plain_fields(fields).items() for item in (name, value)]
        args = [target.value, ",".join(_sources(target)), *pairs]
        return bool(self._transition(keys=[self._key(job_id)], args=args))

    def count_unit(self, job_id: str, unit: str, counts: UnitCounts, errors: ErrorSummary | None = None) -> int:
        keys = [self._key(job_id), self._units_key(job_id)]
        counters = counts.counters()
        pairs = [item for name, count in {**counters, **error_fields(errors)}.items() for item in (name, count)]
        return int(self._count(keys=keys, args=[unit, samples_field(errors), *pairs]))

    def note_progress(self, job_id: str, unit: str, documents: int, tokens: int, planned_tokens: int = 0,
                      planned_chars: int = 0) -> None:
        progress = f"{documents},{tokens},{planned_tokens},{planned_chars}"
        self._progress(keys=[self._key(job_id), self._units_key(job_id)], args=[unit, progress])

    def note_dispatch(self, job_id: str, units: list[str], at: float) -> None:
        if units:
            self.redis.hset(f"poolq:job:{job_id}:dispatch", mapping={unit: at for unit in units})

    def dispatches(self, job_id: str) -> dict[str, float]:
        raw = self.redis.hgetall(f"poolq:job:{job_id}:dispatch")
        return {unit.decode(): float(at) for unit, at in raw.items()}

    def drop_dispatch(self, job_id: str, unit: str) -> None:
        self.redis.hdel(f"poolq:job:{job_id}:dispatch", unit)

    def forget(self, job_id: str) -> None:
        self.redis.delete(f"poolq:job:{job_id}:dispatch")

    def expire(self, job_id: str, ttl_s: float) -> None:
        pipe = self.redis.pipeline()
        for key in (self._key(job_id), self._units_key(job_id), f"poolq:job:{job_id}:dispatch"):
            pipe.expire(key, max(1, int(ttl_s)))
        pipe.execute()

    _ALL_ACTIVE_KEY = "poolq:active"  # every tenant's active jobs, kept with the per-tenant sets

    def add_active(self, tenant: str, job_id: str) -> None:
        self.redis.pipeline().sadd(f"poolq:tenant:{tenant}:active", job_id).sadd(self._ALL_ACTIVE_KEY, job_id).execute()

    def reserve_active(self, tenant: str, job_id: str, cap: int, now: float) -> int | None:
        keys = [f"poolq:tenant:{tenant}:active", self._ALL_ACTIVE_KEY, f"poolq:tenant:{tenant}:reserved"]
        found = int(self._reserve(keys=keys, args=[job_id, cap, now, RESERVATION_GRACE_S, *TERMINAL_STATES]))
        return None if found < 0 else found

    def remove_active(self, tenant: str, job_id: str) -> None:
        pipe = self.redis.pipeline()
        pipe.srem(f"poolq:tenant:{tenant}:active", job_id).srem(self._ALL_ACTIVE_KEY, job_id)
        pipe.hdel(f"poolq:tenant:{tenant}:reserved", job_id).execute()

    def active_ids(self, tenant: str) -> list[str]:
        return sorted(member.decode() for member in self.redis.smembers(f"poolq:tenant:{tenant}:active"))

    def all_active_ids(self) -> list[str]:
        return sorted(member.decode() for member in self.redis.smembers(self._ALL_ACTIVE_KEY))

    def set_counts(self, job_id: str, units: list[str], counts: UnitCounts, errors: ErrorSummary | None = None) -> None:
        stale = [name for name in self.redis.hkeys(self._key(job_id))
                 if name.decode().startswith((ERROR_FIELD, PROGRESS_FIELD, SAMPLES_FIELD))]
        pipe = self.redis.pipeline(transaction=True)
        if stale:
            pipe.hdel(self._key(job_id), *stale)
        counters = counts.counters()
        mapping = {**counters, **error_fields(errors)}
        if samples_field(errors):
            mapping[SAMPLES_FIELD] = samples_field(errors)
        pipe.hset(self._key(job_id), mapping=mapping)
        pipe.delete(self._units_key(job_id))
        if units:
            pipe.sadd(self._units_key(job_id), *units)
        pipe.execute()
