"""What each compute worker measured: tokens per second per model and compute dtype, from its own
shard runs (tokens a committed shard ran over the seconds its attempt took, reading and writing
included: what a job's shard costs). Estimates divide a job's tokens by it (``products/estimate``).

Each report folds into a decayed sum (``DECAY`` per report), so a worker's rate follows its recent
shards without one odd shard swinging it. Only the worker's own process writes its entries.

A worker that goes from one shard straight to the next also pays the gap between them (the last
commit's bookkeeping, the next task's dispatch and start) on every shard of a backlog, so that gap
counts in its seconds (the ETA benchmark's fleet once delivered 335 tokens/s against the 437 its
worker measured without it: docs/benchmarks.md#eta-accuracy). A longer gap is a wait for work, which
a backlog does not pay.

Each report also carries the characters of the records it ran: over a model's reports, the
characters per token this deployment's text has under that model's tokenizer, the prior an
unmeasured job's tokens are estimated with (``jobs/status/token_prior.py``).
"""
from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

_THROUGHPUT_KEY = "poolq:compute:throughput:"  # hash per model: "<worker>\t<dtype>" -> MeasuredRate JSON
DECAY = 0.8
# A gap between the previous report and this shard's start counts when it is at most this share of
# the shard's own seconds: dispatch and a task's start take a moment; a worker that waited for work
# (or ran another model's shard meanwhile) shows a gap as long as a shard or longer.
MAX_GAP_SHARE = 0.5


@dataclass(frozen=True)
class MeasuredRate:
    worker: str
    model: str
    dtype: str
    tokens: float  # decayed sums of the reports
    seconds: float
    reported_at: float
    characters: float = 0.0  # decayed sum too; 0 in entries written before it was kept

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    def folded(self, tokens: int, seconds: float, now: float, characters: int = 0) -> "MeasuredRate":
        return MeasuredRate(self.worker, self.model, self.dtype, self.tokens * DECAY + tokens,
                            self.seconds * DECAY + seconds + self.gap_before(seconds, now), now,
                            self.characters * DECAY + characters)

    def gap_before(self, seconds: float, now: float) -> float:
        """The time between this entry's last report and a shard of ``seconds`` that ended ``now``,
        when the worker went straight on to it (see MAX_GAP_SHARE); else 0."""
        gap = now - seconds - self.reported_at
        return gap if 0 < gap <= seconds * MAX_GAP_SHARE else 0.0


def dtype_of(engine_identity: str | None) -> str:
    """The compute dtype an engine identity names (``sha256:…/float32`` -> ``float32``)."""
    return engine_identity.rsplit("/", 1)[-1] if engine_identity and "/" in engine_identity else "unknown"


def fleet_tokens_per_s(rates: list[MeasuredRate], alive: set[str]) -> float | None:
    """The ``alive`` workers' tokens/s summed, each at its latest measured rate (``rates``: one
    model's); a live worker that has not measured the model counts at the others' mean. None
    without a live measurement: no rate is made up."""
    latest: dict[str, MeasuredRate] = {}
    for rate in sorted(rates, key=lambda rate: rate.reported_at):  # the latest of a worker's dtypes wins
        if rate.worker in alive and rate.tokens_per_s > 0:
            latest[rate.worker] = rate
    if not latest:
        return None
    return sum(rate.tokens_per_s for rate in latest.values()) / len(latest) * len(alive)


def chars_per_token(rates: list[MeasuredRate]) -> float | None:
    """The characters per token of one model's reports (any worker, alive or not: the tokenizer and
    the text do not change with the worker); None before a report counted characters."""
    characters = sum(rate.characters for rate in rates if rate.characters > 0)
    tokens = sum(rate.tokens for rate in rates if rate.characters > 0)
    return characters / tokens if characters > 0 and tokens > 0 else None


class ThroughputBoard(ABC):
    def record(self, worker: str, model: str, dtype: str, tokens: int, seconds: float, now: float | None = None,
               characters: int = 0) -> None:
        """``worker`` ran ``tokens`` of ``model`` at ``dtype`` in ``seconds`` (the records' ``characters``)."""
        if tokens <= 0 or seconds <= 0:
            return
        now = time.time() if now is None else now
        previous = self._get(model, worker, dtype) or MeasuredRate(worker, model, dtype, 0.0, 0.0, now)
        self._put(previous.folded(tokens, seconds, now, characters))

    @abstractmethod
    def rates(self, model: str) -> list[MeasuredRate]:
        """Every worker's measured rate for ``model`` (alive or not: see WorkerRegistry.live_names)."""

    @abstractmethod
    def _get(self, model: str, worker: str, dtype: str) -> MeasuredRate | None: ...

    @abstractmethod
    def _put(self, rate: MeasuredRate) -> None: ...


class RedisThroughputBoard(ThroughputBoard):
    def __init__(self, redis_client) -> None:
        self.redis = redis_client

    def rates(self, model: str) -> list[MeasuredRate]:
        return [MeasuredRate(**json.loads(raw)) for raw in self.redis.hgetall(_THROUGHPUT_KEY + model).values()]

    def _get(self, model: str, worker: str, dtype: str) -> MeasuredRate | None:
        raw = self.redis.hget(_THROUGHPUT_KEY + model, f"{worker}\t{dtype}")
        return None if raw is None else MeasuredRate(**json.loads(raw))

    def _put(self, rate: MeasuredRate) -> None:
        self.redis.hset(_THROUGHPUT_KEY + rate.model, f"{rate.worker}\t{rate.dtype}", json.dumps(asdict(rate)))


class InMemoryThroughputBoard(ThroughputBoard):
    def __init__(self) -> None:
        self._rates: dict[tuple[str, str, str], MeasuredRate] = {}
        self._lock = threading.Lock()

    def rates(self, model: str) -> list[MeasuredRate]:
        with self._lock:
            return [rate for (rate_model, _, _), rate in self._rates.items() if rate_model == model]

    def _get(self, model: str, worker: str, dtype: str) -> MeasuredRate | None:
        with self._lock:
            return self._rates.get((model, worker, dtype))

    def _put(self, rate: MeasuredRate) -> None:
        with self._lock:
            self._rates[(rate.model, rate.worker, rate.dtype)] = rate
