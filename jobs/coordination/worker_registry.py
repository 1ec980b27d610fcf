"""The compute workers alive now: each compute worker process says so every few seconds, and
fair share hands out as many shards at a time as there are such workers (``fair_share.py``).

A worker that stops (or is killed) drops out once its last word is older than the time to live.
With each word it also says what it did with its models (``WorkerModelStats``): which it holds
loaded now (``GET /v1/models``, model-affinity routing), their loads, evictions, load time and
memory (``/metrics``).
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import asdict
from typing import Iterable

from poolq.jobs.coordination.worker_model_stats import UNKNOWN_DTYPE, ModelTotals, WorkerModelStats, model_totals

log = logging.getLogger(__name__)

_WORKERS_KEY = "poolq:compute:workers"  # sorted set: worker -> when its word runs out
# + worker: JSON list of its WorkerModelStats, expiring with its word. Not the older
# "poolq:compute:models:" sets: a worker of the previous version may still write those during an upgrade.
_STATS_KEY = "poolq:compute:model-stats:"


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
    def report_models(self, worker: str, stats: Iterable[WorkerModelStats], ttl_s: float) -> None:
        """``worker``'s engines now, each with what it did with them (said with each heartbeat,
        replacing its previous report; forgotten with the worker)."""

    @abstractmethod
    def reports(self, workers: Iterable[str]) -> dict[str, tuple[WorkerModelStats, ...]]:
        """Each of ``workers``' latest report (empty for one that has none, or whose report expired)."""

    def models_of(self, worker: str) -> frozenset[str]:
        """The models ``worker`` last said it has loaded."""
        return frozenset(stats.model for stats in self.reports([worker])[worker] if stats.loaded)

    def loaded_models(self, now: float | None = None) -> dict[str, int]:
        """Each model loaded by a live worker, with how many live workers have it."""
        return {model: totals.loaded_workers for model, totals in self.model_totals(now).items() if totals.loaded_workers}

    def model_totals(self, now: float | None = None) -> dict[str, ModelTotals]:
        """Each model some live worker reported, summed over the live workers' latest reports."""
        return model_totals(self.reports(sorted(self.live_names(now))).values())

    def model_engines(self, model: str, now: float | None = None) -> Counter[tuple[str, str]]:
        """The (dtype, device kind) engines live workers hold ``model`` loaded in, each with how many
        workers hold it so."""
        return Counter((stats.dtype, stats.device) for report in self.reports(sorted(self.live_names(now))).values()
                       for stats in report if stats.model == model and stats.loaded and stats.dtype != UNKNOWN_DTYPE)

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
        self.redis.delete(_STATS_KEY + worker)

    def report_models(self, worker: str, stats: Iterable[WorkerModelStats], ttl_s: float) -> None:
        payload = json.dumps([asdict(item) for item in stats])
        self.redis.set(_STATS_KEY + worker, payload, px=max(1, int(ttl_s * 1000)))

    def reports(self, workers: Iterable[str]) -> dict[str, tuple[WorkerModelStats, ...]]:
        names = list(workers)
        raws = self.redis.mget([_STATS_KEY + worker for worker in names]) if names else []
        return {worker: _parsed(worker, raw) for worker, raw in zip(names, raws)}

    def live(self, now: float | None = None) -> int:
        return int(self.redis.zcount(_WORKERS_KEY, f"({time.time() if now is None else now}", "+inf"))

    def live_names(self, now: float | None = None) -> set[str]:
        names = self.redis.zrangebyscore(_WORKERS_KEY, f"({time.time() if now is None else now}", "+inf")
        return {name.decode() if isinstance(name, bytes) else name for name in names}


class InMemoryWorkerRegistry(WorkerRegistry):
    """For in-process runs and unit tests (where no worker ever registers, fair share falls back
    to ``Settings.sharding.dispatch_window``)."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._reports: dict[str, tuple[WorkerModelStats, ...]] = {}
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
            self._reports.pop(worker, None)

    def report_models(self, worker: str, stats: Iterable[WorkerModelStats], ttl_s: float) -> None:
        # no expiry of its own: a report is read only for a live worker, and a worker's word expires
        with self._lock:
            self._reports[worker] = tuple(stats)

    def reports(self, workers: Iterable[str]) -> dict[str, tuple[WorkerModelStats, ...]]:
        with self._lock:
            return {worker: self._reports.get(worker, ()) for worker in workers}

    def live(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        with self._lock:
            return sum(until > now for until in self._until.values())

    def live_names(self, now: float | None = None) -> set[str]:
        now = time.time() if now is None else now
        with self._lock:
            return {worker for worker, until in self._until.items() if until > now}


def _parsed(worker: str, raw: bytes | str | None) -> tuple[WorkerModelStats, ...]:
    """A worker's stored report; one that cannot be read (a worker of another version) counts as none,
    logged: metrics and the model list still answer."""
    if raw is None:
        return ()
    try:
        return tuple(WorkerModelStats(**item) for item in json.loads(raw))
    except (ValueError, TypeError) as exc:
        log.warning("worker %s: its model report is unreadable, counted as none: %s", worker, exc)
        return ()
