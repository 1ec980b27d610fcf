"""RedBeat's scheduler, made to ride out Redis restarts and wipes instead of exiting.

RedBeat extends its lock and reads due entries from Redis on every tick. Stock, a tick that
meets a refused connection (Redis restarting) or a lost lock (Redis wiped, or the lock expired
while we were cut off) raises out of ``celery beat``, which then exits with status 1 and leaves
jobs without their reconciler until a supervisor restarts it. ``PoolqBeatScheduler`` instead:

- on a connection error or timeout: logs, waits ``retry_interval_s`` and tries again;
- on a lost lock: tries to take the lock again without blocking; whoever holds it fires, the
  other beat stands by and retries on its next tick (so two beats never fire at once);
- after either: re-installs the static entries (the reconciler) that a wipe removed. Stored
  reindex schedules are re-synced by the reconciler itself.
"""
from __future__ import annotations

import logging

from redbeat.schedulers import LUA_EXTEND_TO_SCRIPT, RedBeatScheduler, get_redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.lock import Lock

logger = logging.getLogger("celery.beat")

REDIS_UNAVAILABLE = (RedisConnectionError, RedisTimeoutError)


class PoolqBeatScheduler(RedBeatScheduler):
    """A RedBeat scheduler whose ticks survive Redis restarts, wipes and lock loss."""

    #: Seconds between attempts while Redis is unreachable or another beat holds the lock.
    retry_interval_s = 1.0
    #: RedBeat's single-beat lock; None until acquired (RedBeat takes it at start-up, unless Redis was down).
    lock: Lock | None

    def __init__(self, *args, **kwargs):
        self._must_restore = False
        super().__init__(*args, **kwargs)

    def tick(self, *args, **kwargs) -> float:
        try:
            return self._tick_or_restore(*args, **kwargs)
        except REDIS_UNAVAILABLE as exc:
            logger.warning("beat: Redis unavailable (%s); retrying in %.1fs", exc, self.retry_interval_s)
            self._must_restore = True
            return self.retry_interval_s

    def _tick_or_restore(self, *args, **kwargs) -> float:
        if self._must_restore and not self._restore():
            return self.max_interval  # standing by: another beat holds the lock
        try:
            return super().tick(*args, **kwargs)
        except LockError:
            logger.warning("beat: lost RedBeat's lock (Redis restarted or wiped); taking it again")
            self._must_restore = True
            return 0.0 if self._restore() else self.max_interval

    def _restore(self) -> bool:
        """Own the lock again (without blocking) and re-install static entries; False if another beat owns it."""
        if self.lock_key and not self._own_lock():
            logger.info("beat: another beat holds the lock; standing by")
            return False
        self.setup_schedule()
        self._must_restore = False
        logger.info("beat: lock held and static entries restored")
        return True

    def _own_lock(self) -> bool:
        if self.lock is None:  # the start-up acquisition failed (Redis was down then)
            self.lock = self._new_lock()
        if self.lock.owned():
            return True
        return bool(self.lock.acquire(blocking=False))

    def _new_lock(self) -> Lock:
        """The lock as RedBeat's start-up makes it: its ``extend`` runs RedBeat's script (extend *to* a time)."""
        client = get_redis(self.app)
        lock = client.lock(self.lock_key, timeout=self.lock_timeout, sleep=self.max_interval)
        lock.lua_extend = client.register_script(LUA_EXTEND_TO_SCRIPT)
        return lock
