"""The dispatch window: which of a job's shards have been handed to the queue and are not yet counted.

A job never has more than ``Settings.dispatch_window`` shard tasks queued or running. Shards are
claimed in order from a cursor; each counted commit releases its shard and claims the next, and
the reconciler refills a window that lost messages. So Redis holds O(window) messages and
bookkeeping per job, not O(shards), and a cancel leaves at most a window of tasks to drain.

The ledger stays the truth: after a Redis wipe the window starts again from shard 0, and shards
that were already committed are counted without any model work.
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod


class DispatchWindow(ABC):
    @abstractmethod
    def claim(self, job_id: str, window: int, num_shards: int) -> list[int]:
        """Atomically take the next shards so that at most ``window`` are in flight; returns them."""

    @abstractmethod
    def release(self, job_id: str, shard: int) -> None:
        """``shard`` is counted: it leaves the window."""

    @abstractmethod
    def in_flight(self, job_id: str) -> list[int]:
        """Claimed and not yet released, in order."""

    @abstractmethod
    def cursor(self, job_id: str) -> int:
        """How many shards have been claimed so far."""

    @abstractmethod
    def expire(self, job_id: str, ttl_s: float) -> None:
        """The job is finished: its window is dropped after ``ttl_s``."""


# KEYS[1] cursor (string), KEYS[2] in-flight set; ARGV[1] window, ARGV[2] number of shards.
_CLAIM_LUA = """
local cursor = tonumber(redis.call('GET', KEYS[1]) or '0')
local room = tonumber(ARGV[1]) - redis.call('SCARD', KEYS[2])
local claimed = {}
while room > 0 and cursor < tonumber(ARGV[2]) do
  redis.call('SADD', KEYS[2], cursor)
  table.insert(claimed, cursor)
  cursor = cursor + 1
  room = room - 1
end
redis.call('SET', KEYS[1], cursor)
return claimed
"""


class RedisDispatchWindow(DispatchWindow):
    """A cursor (``poolq:job:<id>:cursor``) and an in-flight set (``poolq:job:<id>:inflight``)."""

    def __init__(self, redis_client) -> None:
        self.redis = redis_client
        self._claim = redis_client.register_script(_CLAIM_LUA)

    @staticmethod
    def _keys(job_id: str) -> list[str]:
        return [f"poolq:job:{job_id}:cursor", f"poolq:job:{job_id}:inflight"]

    def claim(self, job_id: str, window: int, num_shards: int) -> list[int]:
        return [int(shard) for shard in self._claim(keys=self._keys(job_id), args=[window, num_shards])]

    def release(self, job_id: str, shard: int) -> None:
        self.redis.srem(self._keys(job_id)[1], shard)

    def in_flight(self, job_id: str) -> list[int]:
        return sorted(int(shard) for shard in self.redis.smembers(self._keys(job_id)[1]))

    def cursor(self, job_id: str) -> int:
        return int(self.redis.get(self._keys(job_id)[0]) or 0)

    def expire(self, job_id: str, ttl_s: float) -> None:
        pipe = self.redis.pipeline()
        for key in self._keys(job_id):
            pipe.expire(key, max(1, int(ttl_s)))
        pipe.execute()


class InMemoryDispatchWindow(DispatchWindow):
    """For in-process runs and unit tests (expiry is immediate: nothing outlives the process)."""

    def __init__(self) -> None:
        self._cursors: dict[str, int] = {}
        self._in_flight: dict[str, set[int]] = {}
        self._lock = threading.Lock()

    def claim(self, job_id: str, window: int, num_shards: int) -> list[int]:
        with self._lock:
            in_flight = self._in_flight.setdefault(job_id, set())
            cursor = self._cursors.get(job_id, 0)
            claimed = list(range(cursor, min(num_shards, cursor + max(0, window - len(in_flight)))))
            in_flight.update(claimed)
            self._cursors[job_id] = cursor + len(claimed)
            return claimed

    def release(self, job_id: str, shard: int) -> None:
        with self._lock:
            self._in_flight.get(job_id, set()).discard(shard)

    def in_flight(self, job_id: str) -> list[int]:
        with self._lock:
            return sorted(self._in_flight.get(job_id, ()))

    def cursor(self, job_id: str) -> int:
        with self._lock:
            return self._cursors.get(job_id, 0)

    def expire(self, job_id: str, ttl_s: float) -> None:
        with self._lock:
            self._cursors.pop(job_id, None)
            self._in_flight.pop(job_id, None)
