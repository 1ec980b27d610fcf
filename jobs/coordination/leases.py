"""Leases on units of work (``plan``, ``shard-00003``, ``finalize``) and their attempt counts.

A lease says "attempt A is running this unit until T"; its holder renews it while it works.
A delivery that finds the unit leased does no model work. Attempts that end without
releasing their lease (a killed worker) count as crashes; the runner gives up on a unit that
crashed its worker too often. Leases live in Redis; losing them only costs a repeated attempt,
never a duplicate result (the commit marker in the store decides).
"""
from __future__ import annotations

import threading
import time
import uuid
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True)
class Lease:
    job_id: str
    unit: str
    attempt: str  # unique per attempt; names the attempt's objects in the store
    crashes_before: int  # earlier attempts of this unit that never released their lease


def new_attempt_id() -> str:
    return uuid.uuid4().hex[:16]


class LeaseStore(ABC):
    @abstractmethod
    def acquire(self, job_id: str, unit: str, ttl_s: float) -> Lease | None:
        """A new lease on the unit, or None while another attempt holds one."""

    @abstractmethod
    def renew(self, lease: Lease, ttl_s: float) -> bool:
        """Extend ``lease``; False if it expired or another attempt took the unit."""

    @abstractmethod
    def release(self, lease: Lease) -> None:
        """End ``lease`` cleanly (the attempt finished, failed or stopped; it did not crash)."""

    @abstractmethod
    def holder(self, job_id: str, unit: str) -> str | None:
        """The attempt holding a live lease on the unit, if any."""

    @abstractmethod
    def expires_in(self, job_id: str, unit: str) -> float | None:
        """Seconds until the unit's live lease lapses (unless renewed meanwhile); None if none is live."""

    @abstractmethod
    def live_units(self, job_id: str) -> list[str]:
        """Units of the job with a live lease."""

    @abstractmethod
    def last_started(self, job_id: str) -> dict[str, float]:
        """Unit -> wall-clock time its latest attempt took its lease (its task was consumed then)."""

    @abstractmethod
    def forget(self, job_id: str) -> None:
        """Drop the job's attempt counts (after it finished)."""


# KEYS[1] lease key, KEYS[2] attempts hash; ARGV[1] attempt, ARGV[2] ttl ms, ARGV[3] unit, ARGV[4] now.
_ACQUIRE_LUA = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return -1 end
redis.call('HSET', KEYS[2], ARGV[3] .. ':started_at', ARGV[4])
local started = redis.call('HINCRBY', KEYS[2], ARGV[3] .. ':started', 1)
local ended = tonumber(redis.call('HGET', KEYS[2], ARGV[3] .. ':ended') or '0')
return started - 1 - ended
"""
_RENEW_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HINCRBY', KEYS[2], ARGV[2] .. ':ended', 1)
  return 1
end
return 0
"""


class RedisLeaseStore(LeaseStore):
    """``poolq:lease:<job>:<unit>`` (value: attempt id, with a TTL) and ``poolq:attempts:<job>``."""

    def __init__(self, redis_client) -> None:
        self.redis = redis_client
        self._acquire = redis_client.register_script(_ACQUIRE_LUA)
        self._renew = redis_client.register_script(_RENEW_LUA)
        self._release = redis_client.register_script(_RELEASE_LUA)

    @staticmethod
    def _lease_key(job_id: str, unit: str) -> str:
        return f"poolq:lease:{job_id}:{unit}"

    @staticmethod
    def _attempts_key(job_id: str) -> str:
        return f"poolq:attempts:{job_id}"

    def acquire(self, job_id: str, unit: str, ttl_s: float) -> Lease | None:
        attempt = new_attempt_id()
        keys = [self._lease_key(job_id, unit), self._attempts_key(job_id)]
        crashes = int(self._acquire(keys=keys, args=[attempt, int(ttl_s * 1000), unit, repr(time.time())]))
        return None if crashes < 0 else Lease(job_id, unit, attempt, crashes)

    def renew(self, lease: Lease, ttl_s: float) -> bool:
        key = self._lease_key(lease.job_id, lease.unit)
        return bool(self._renew(keys=[key], args=[lease.attempt, int(ttl_s * 1000)]))

    def release(self, lease: Lease) -> None:
        keys = [self._lease_key(lease.job_id, lease.unit), self._attempts_key(lease.job_id)]
        self._release(keys=keys, args=[lease.attempt, lease.unit])

    def holder(self, job_id: str, unit: str) -> str | None:
        value = self.redis.get(self._lease_key(job_id, unit))
        return value.decode() if value is not None else None

    def expires_in(self, job_id: str, unit: str) -> float | None:
        milliseconds = int(self.redis.pttl(self._lease_key(job_id, unit)))
        return milliseconds / 1000 if milliseconds >= 0 else None  # -2: no key; -1: no TTL (never set so)

    def live_units(self, job_id: str) -> list[str]:
        prefix = self._lease_key(job_id, "")
        return sorted(key.decode()[len(prefix):] for key in self.redis.scan_iter(match=f"{prefix}*", count=500))

    def last_started(self, job_id: str) -> dict[str, float]:
        raw = self.redis.hgetall(self._attempts_key(job_id))
        suffix = ":started_at"
        return {k.decode()[: -len(suffix)]: float(v) for k, v in raw.items() if k.decode().endswith(suffix)}

    def forget(self, job_id: str) -> None:
        self.redis.delete(self._attempts_key(job_id))


class InMemoryLeaseStore(LeaseStore):
    """Leases with monotonic-clock expiry, for in-process runs and unit tests."""

    def __init__(self, clock=time.monotonic, wall_clock=time.time) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._started_at: dict[tuple[str, str], float] = {}
        self._leases: dict[tuple[str, str], tuple[str, float]] = {}
        self._attempts: dict[tuple[str, str], list[int]] = {}  # [started, ended]
        self._lock = threading.Lock()

    def _live(self, job_id: str, unit: str) -> str | None:
        entry = self._leases.get((job_id, unit))
        if entry is None or entry[1] <= self._clock():
            self._leases.pop((job_id, unit), None)
            return None
        return entry[0]

    def acquire(self, job_id: str, unit: str, ttl_s: float) -> Lease | None:
        with self._lock:
            if self._live(job_id, unit) is not None:
                return None
            attempt = new_attempt_id()
            self._leases[(job_id, unit)] = (attempt, self._clock() + ttl_s)
            counts = self._attempts.setdefault((job_id, unit), [0, 0])
            counts[0] += 1
            self._started_at[(job_id, unit)] = self._wall_clock()
            return Lease(job_id, unit, attempt, counts[0] - 1 - counts[1])

    def renew(self, lease: Lease, ttl_s: float) -> bool:
        with self._lock:
            if self._live(lease.job_id, lease.unit) != lease.attempt:
                return False
            self._leases[(lease.job_id, lease.unit)] = (lease.attempt, self._clock() + ttl_s)
            return True

    def release(self, lease: Lease) -> None:
        with self._lock:
            if self._live(lease.job_id, lease.unit) == lease.attempt:
                del self._leases[(lease.job_id, lease.unit)]
                self._attempts[(lease.job_id, lease.unit)][1] += 1

    def holder(self, job_id: str, unit: str) -> str | None:
        with self._lock:
            return self._live(job_id, unit)

    def expires_in(self, job_id: str, unit: str) -> float | None:
        with self._lock:
            if self._live(job_id, unit) is None:
                return None
            return self._leases[(job_id, unit)][1] - self._clock()

    def live_units(self, job_id: str) -> list[str]:
        with self._lock:
            return sorted(unit for (job, unit) in list(self._leases) if job == job_id and self._live(job, unit))

    def last_started(self, job_id: str) -> dict[str, float]:
        with self._lock:
            return {unit: at for (job, unit), at in self._started_at.items() if job == job_id}

    def forget(self, job_id: str) -> None:
        with self._lock:
            for key in [key for key in self._attempts if key[0] == job_id]:
                del self._attempts[key]
            for key in [key for key in self._started_at if key[0] == job_id]:
                del self._started_at[key]


class LeaseKeeper:
    """Renews a lease from a background thread while the work runs (``with LeaseKeeper(...):``)."""

    def __init__(self, leases: LeaseStore, lease: Lease, ttl_s: float) -> None:
        self.leases, self.lease, self.ttl_s = leases, lease, ttl_s
        self.lost = threading.Event()  # set when a renewal found the lease gone
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{lease.unit}", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                if not self.leases.renew(self.lease, self.ttl_s):
                    self.lost.set()
            except Exception:  # noqa: BLE001 - Redis away: keep working; the commit marker decides
                self.lost.set()

    def __enter__(self) -> "LeaseKeeper":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def lease_held(leases: LeaseStore, job_id: str, unit: str, ttl_s: float) -> Iterator[Lease | None]:
    """A lease on the unit, renewed while the block runs and released after it; None (and the block
    runs all the same, to do nothing) while another attempt holds the unit."""
    lease = leases.acquire(job_id, unit, ttl_s)
    if lease is None:
        yield None
        return
    try:
        with LeaseKeeper(leases, lease, ttl_s):
            yield lease
    finally:
        leases.release(lease)
