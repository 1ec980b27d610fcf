"""Where a shard's task goes (model affinity): to a compute worker that holds the job's model
loaded, while one can take it soon; else to the general queue, which every compute worker consumes.

Fair share decides WHICH shards go out (``fair_share.py``); routing only decides WHERE. A shard
goes to its model's queue (``model_queue``, consumed by the workers holding the model) when some
live worker holds the model and fewer tasks wait in that queue than there are such workers: each
holder then has at most one task waiting for it. Past that, or when no live worker holds the model
(nobody may consume its queue; a model nobody loaded yet must not starve), the shard goes to the
general queue, where any worker takes it, loading the model if it must. So a busy holder never
leaves shards waiting while the other workers idle.

Shards are sent as a task ends (a commit frees its slot for the next shard): the worker sending
them is about to take its next task. If it holds the model, one task waiting in the model's queue
is as good as taken, and one more may wait there (once per round: it takes one task). Without that,
a holder committing with its next shard waiting would send the shard after it to the general queue,
and an idle worker would load the model for it.
"""
from __future__ import annotations

import logging
import sys
from collections import Counter
from typing import Callable, TypeVar

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.enqueuer import GPU_QUEUE, model_queue

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_UNREADABLE = sys.maxsize  # a queue depth that could not be read: as if the queue were full

AFFINITY = "affinity"  # routed to the queue of a worker holding the model
GENERAL = "general"  # routed to the general queue


def shard_queue(ctx: JobContext, model: str | None) -> str:
    """The queue one shard of a ``model`` job goes to (``ShardRouter`` routes a round of them)."""
    return ShardRouter(ctx).queue(model)


def affinity_queue(model: str, holders: int, waiting: int) -> str | None:
    """The model's queue when one of its ``holders`` (live workers holding it) can take a task soon:
    fewer than ``holders`` tasks wait there; else None (the general queue)."""
    return model_queue(model) if holders > waiting else None


class ShardRouter:
    """Routes one round of shard tasks: the live holders are read once, each model queue's depth at
    most once (then counted on by what this round sends there), each job's model once."""

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self.routed: Counter[str] = Counter()  # route -> shards this round
        self._holders: dict[str, int] | None = None
        self._waiting: dict[str, int] = {}
        self._models: dict[str, str | None] = {}
        # The models this process holds: it sends at the end of a task, and takes one task next.
        self._taking_next: frozenset[str] | None = ctx.engines.loaded

    def queue_of_job(self, job_id: str) -> str:
        """The queue a shard of job ``job_id`` goes to (its model from the cached status)."""
        if not self.holders():
            return self._route(GENERAL, GPU_QUEUE)  # nobody holds a model: no need to read the job's
        if job_id not in self._models:
            self._models[job_id] = self._read(lambda: self.ctx.status.field(job_id, "model"), None, f"job {job_id}'s model")
        return self.queue(self._models[job_id])

    def queue(self, model: str | None) -> str:
        """The queue a shard of a ``model`` job goes to (None: its model is unknown here)."""
        holders = self.holders().get(model, 0) if model is not None else 0
        if model is None or not holders:
            return self._route(GENERAL, GPU_QUEUE)
        queue = model_queue(model)
        if queue not in self._waiting:
            # A depth the enqueuer cannot tell (None) counts as empty; one that cannot be read, as full.
            unreadable: int | None = _UNREADABLE
            depth = self._read(lambda: self.ctx.enqueuer.waiting(queue), unreadable, f"the depth of {queue}")
            self._waiting[queue] = depth or 0
        if affinity_queue(model, holders + self._takes_next(model), self._waiting[queue]) is None:
            return self._route(GENERAL, GPU_QUEUE)
        if affinity_queue(model, holders, self._waiting[queue]) is None:
            self._taking_next = None  # the one task this process takes next is counted now
        self._waiting[queue] += 1
        return self._route(AFFINITY, queue)

    def _takes_next(self, model: str) -> int:
        """1 if this process holds ``model`` and its next task is not yet counted as taken, else 0."""
        return int(self._taking_next is not None and model in self._taking_next)

    def holders(self) -> dict[str, int]:
        """Each model some live compute worker holds, with how many such workers."""
        if self._holders is None:
            none_held: dict[str, int] = {}
            self._holders = self._read(lambda: self.ctx.workers.loaded_models(), none_held, "the models the workers hold")
        return self._holders

    def record(self) -> None:
        """Count this round's routes (``JobMetrics.shards_routed``)."""
        if self.routed:
            self.ctx.metrics.shards_routed(self.routed)
            self.routed = Counter()

    def _route(self, route: str, queue: str) -> str:
        self.routed[route] += 1
        return queue

    @staticmethod
    def _read(read: Callable[[], _T], fallback: _T, what: str) -> _T:
        """``read()``, or ``fallback`` (one that sends the shard to the general queue) when it fails:
        the general queue is always a right place for a shard, so routing never stops one going out."""
        try:
            return read()
        except Exception:  # noqa: BLE001 - a Redis hiccup: the send itself may still work
            log.warning("shard routing: reading %s failed; routing to the general queue", what, exc_info=True)
            return fallback
