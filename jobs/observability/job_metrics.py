"""Counters of work done, recorded by the jobs layer and read by the API's ``/metrics``.

What is recorded, and where (each exactly once per event, by construction):

- ``shard_committed``: by the shard attempt whose commit marker won (``shard_runner``), with
  that attempt's wall time; a redelivery of a committed shard or a losing attempt records nothing.
- ``plan_errors``: by the planner whose ``plan.json`` write won.
- ``job_finished``: by the finalizer whose manifest write won.
- ``shards_routed``: by whoever sends a round of shard tasks (``shard_routing.py``): how many went
  to a worker holding their model (``affinity``) and how many to the general queue (``general``). A
  lost task the reconciler sends again is routed, and counted, again; a Celery retry goes back to
  the queue it came from, uncounted.

A crash between the winning write and the record loses that one sample (at most once): these
are operational counters, the ledger stays the record of what happened. In Redis they are
shared by every process (``poolq:metrics:*``); in memory they live as long as the context.
"""
from __future__ import annotations

import bisect
import logging
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import redis

log = logging.getLogger(__name__)

# Upper bounds (seconds) of the shard latency histogram's buckets; the last one is +Inf.
LATENCY_BUCKETS_S: tuple[float, ...] = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, float("inf"))


def bucket_index(latency_s: float) -> int:
    """The first bucket whose upper bound is >= ``latency_s`` (Prometheus' ``le``)."""
    return bisect.bisect_left(LATENCY_BUCKETS_S, latency_s)


@dataclass
class MetricsTotals:
    """Everything recorded so far. ``shard_buckets`` are per bucket (not cumulative), one per bound."""

    finished: dict[str, int] = field(default_factory=dict)  # final job state -> jobs
    errors: dict[str, int] = field(default_factory=dict)  # record error code -> records
    tokens: int = 0
    documents: int = 0
    shard_buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS_S))
    shard_latency_sum_s: float = 0.0
    routed: dict[str, int] = field(default_factory=dict)  # route (affinity | general) -> shard tasks sent

    @property
    def shards(self) -> int:
        return sum(self.shard_buckets)


class JobMetrics(ABC):
    """Where the jobs layer records work done; ``totals`` reads it all back."""

    @abstractmethod
    def shard_committed(self, latency_s: float, documents: int, tokens: int, error_codes: Counter) -> None:
        """A shard was committed by an attempt that ran ``latency_s`` seconds."""

    @abstractmethod
    def plan_errors(self, error_codes: Counter) -> None:
        """Records rejected while planning, by error code."""

    @abstractmethod
    def job_finished(self, state: str) -> None:
        """A job reached its final ``state`` (a JobState value)."""

    @abstractmethod
    def shards_routed(self, routes: Mapping[str, int]) -> None:
        """Shard tasks sent, by route (``shard_routing``: affinity, general)."""

    @abstractmethod
    def totals(self) -> MetricsTotals: ...


class InMemoryJobMetrics(JobMetrics):
    """For in-process runs and tests: counters in this process."""

    def __init__(self) -> None:
        self._totals = MetricsTotals()
        self._lock = threading.Lock()

    def shard_committed(self, latency_s: float, documents: int, tokens: int, error_codes: Counter) -> None:
        with self._lock:
            self._totals.shard_buckets[bucket_index(latency_s)] += 1
            self._totals.shard_latency_sum_s += latency_s
            self._totals.documents += documents
            self._totals.tokens += tokens
            _add(self._totals.errors, error_codes)

    def plan_errors(self, error_codes: Counter) -> None:
        with self._lock:
            _add(self._totals.errors, error_codes)

    def job_finished(self, state: str) -> None:
        with self._lock:
            _add(self._totals.finished, {state: 1})

    def shards_routed(self, routes: Mapping[str, int]) -> None:
        with self._lock:
            _add(self._totals.routed, routes)

    def totals(self) -> MetricsTotals:
        with self._lock:
            current = self._totals
            return MetricsTotals(dict(current.finished), dict(current.errors), current.tokens, current.documents,
                                 list(current.shard_buckets), current.shard_latency_sum_s, dict(current.routed))


def _add(target: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        if amount:
            target[name] = target.get(name, 0) + amount


class RedisJobMetrics(JobMetrics):
    """Hashes ``<prefix>:shards`` (count per bucket, latency sum, tokens, documents),
    ``<prefix>:errors`` (code -> records), ``<prefix>:finished`` (state -> jobs) and ``<prefix>:routed``
    (route -> shard tasks). Each record is one MULTI/EXEC, so a scrape never sees half of one. A
    record that fails (Redis away) is logged and dropped: the work it counts is done and committed
    regardless."""

    def __init__(self, redis_client, prefix: str = "poolq:metrics") -> None:
        self.redis = redis_client
        self.shards_key = f"{prefix}:shards"
        self.errors_key = f"{prefix}:errors"
        self.finished_key = f"{prefix}:finished"
        self.routed_key = f"{prefix}:routed"

    def shard_committed(self, latency_s: float, documents: int, tokens: int, error_codes: Counter) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hincrby(self.shards_key, f"bucket:{bucket_index(latency_s)}", 1)
        pipe.hincrbyfloat(self.shards_key, "latency_sum_s", latency_s)
        pipe.hincrby(self.shards_key, "documents", documents)
        pipe.hincrby(self.shards_key, "tokens", tokens)
        self._count(pipe, self.errors_key, error_codes)
        self._execute(pipe)

    def plan_errors(self, error_codes: Counter) -> None:
        if any(error_codes.values()):
            pipe = self.redis.pipeline(transaction=True)
            self._count(pipe, self.errors_key, error_codes)
            self._execute(pipe)

    def job_finished(self, state: str) -> None:
        self._execute(self.redis.pipeline(transaction=True).hincrby(self.finished_key, state, 1))

    def shards_routed(self, routes: Mapping[str, int]) -> None:
        if any(routes.values()):
            pipe = self.redis.pipeline(transaction=True)
            self._count(pipe, self.routed_key, routes)
            self._execute(pipe)

    @staticmethod
    def _execute(pipe) -> None:
        try:
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("job metrics not recorded: %s: %s", type(exc).__name__, exc)

    @staticmethod
    def _count(pipe, key: str, amounts: Mapping[str, int]) -> None:
        for name, amount in amounts.items():
            if amount:
                pipe.hincrby(key, name, amount)

    def totals(self) -> MetricsTotals:
        pipe = self.redis.pipeline(transaction=True)
        for key in (self.shards_key, self.errors_key, self.finished_key, self.routed_key):
            pipe.hgetall(key)
        shards, errors, finished, routed = ({k.decode(): v.decode() for k, v in raw.items()} for raw in pipe.execute())
        buckets = [int(shards.get(f"bucket:{index}", 0)) for index in range(len(LATENCY_BUCKETS_S))]
        return MetricsTotals(
            finished={state: int(n) for state, n in finished.items()},
            errors={code: int(n) for code, n in errors.items()},
            tokens=int(shards.get("tokens", 0)),
            documents=int(shards.get("documents", 0)),
            shard_buckets=buckets,
            shard_latency_sum_s=float(shards.get("latency_sum_s", 0.0)),
            routed={route: int(n) for route, n in routed.items()},
        )
