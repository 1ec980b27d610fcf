"""The compute workers alive now: each compute worker process says so every few seconds, and
fair share hands out as many shards at a time as there are such workers (``fair_share.py``).

A worker that stops (or is killed) drops out once its last word is older than the time to live.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from abc import ABC, abstractmethod

_WORKERS_KEY = "poolq:compute:workers"  # sorted set: worker -> when its word runs out
_MODELS_KEY = "poolq:compute:models:"  # + worker: the set of models it has loaded, expiring with its word


def this_worker() -> str:
    """This process's name among the workers (its heartbeat and its throughput reports)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class WorkerRegistry(ABC):
    @abstractmethod
    def heartbeat(self, worker: str, ttl_s: float, now: float | None = None) -> bool:
        """``worker`` is alive for ``ttl_s`` more seconds; True if it was not known (just started)."""

    @abstractmethod
    def forget(self, worker: str) -> None:
        """``worker`` stopped."""

    @abstractmethod
    def live(self, now: float | None = None) -> int:
        """How many workers are alive."""

    @abstractmethod
    def live_names(self, now: float | None = None) -> set[str]:
        """Which workers are alive."""

    @abstractmethod
    def report_models(self, worker: str, models: frozenset[str], ttl_s: float) -> None:
        """``worker`` has ``models`` loaded now (said with each heartbeat, forgotten with the worker)."""

    @abstractmethod
    def models_of(self, worker: str) -> frozenset[str]:
        """The models ``worker`` last said it has loaded."""

    def loaded_models(self, now: float | None = None) -> dict[str, int]:
        """Each model loaded by a live worker, with how many live workers have it."""
        counts: dict[str, int] = {}
        for worker in self.live_names(now):
            for model in self.models_of(worker):
                counts[model] = counts.get(model, 0) + 1
        return counts


class RedisWorkerRegistry(WorkerRegistry):
    def __init__(self, redis_client) -> None:
        self.redis = redis_client

    def heartbeat(self, worker: str, ttl_s: float, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        pipe = self.redis.pipeline()
        pipe.zremrangebyscore(_WORKERS_KEY, "-inf", now)  # the ones whose word ran out
        pipe.zadd(_WORKERS_KEY, {worker: now + ttl_s})
        return bool(pipe.execute()[1])

    def forget(self, worker: str) -> None:
        self.redis.zrem(_WORKERS_KEY, worker)
        self.redis.delete(_MODELS_KEY + worker)

    def report_models(self, worker: str, models: frozenset[str], ttl_s: float) -> None:
        pipe = self.redis.pipeline()
        pipe.delete(_MODELS_KEY + worker)
        if models:
            pipe.sadd(_MODELS_KEY + worker, *sorted(models))
            pipe.expire(_MODELS_KEY + worker, max(1, int(ttl_s)))
        pipe.execute()

    def models_of(self, worker: str) -> frozenset[str]:
        return frozenset(name.decode() if isinstance(name, bytes) else name for name in self.redis.smembers(_MODELS_KEY + worker))

    def live(self, now: float | None = None) -> int:
        return int(self.redis.zcount(_WORKERS_KEY, f"({time.time() if now is None else now}", "+inf"))

    def live_names(self, now: float | None = None) -> set[str]:
        names = self.redis.zrangebyscore(_WORKERS_KEY, f"({time.time() if now is None else now}", "+inf")
        return {name.decode() if isinstance(name, bytes) else name for name in names}


class InMemoryWorkerRegistry(WorkerRegistry):
    """For in-process runs and unit tests (where no worker ever registers, fair share falls back
    to ``Settings.dispatch_window``)."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._models: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()

    def heartbeat(self, worker: str, ttl_s: float, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        with self._lock:
            new = self._until.get(worker, 0.0) <= now
            self._until[worker] = now + ttl_s
            return new

    def forget(self, worker: str) -> None:
        with self._lock:
            self._until.pop(worker, None)
            self._models.pop(worker, None)

    def report_models(self, worker: str, models: frozenset[str], ttl_s: float) -> None:
        with self._lock:
            self._models[worker] = frozenset(models)

    def models_of(self, worker: str) -> frozenset[str]:
        with self._lock:
            return self._models.get(worker, frozenset())

    def live(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        with self._lock:
            return sum(until > now for until in self._until.values())

    def live_names(self, now: float | None = None) -> set[str]:
        now = time.time() if now is None else now
        with self._lock:
            return {worker for worker, until in self._until.items() if until > now}
