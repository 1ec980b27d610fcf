"""Which of a job's units look lost: their task is neither running nor (likely) waiting in a queue.

Used by the reconciler for every unit, and by the planner for its section tasks. A unit is lost
when it is not running and its task was consumed since it was last sent (its attempt died), or
was never sent as far as Redis knows, or was sent long ago to a queue that now holds nothing.
A task sent long ago is re-sent only while its queue is empty: under a backlog it is most likely
still waiting there, and re-sending would grow the backlog with duplicates. A shard may have gone
to the general queue or to its model's (``shard_routing.py``); the model's queue counts only while
a live worker holds the model: once its holders are gone nobody may consume it, and a shard waiting
there is sent again, routed by the live holders (the stale message, if a worker takes it later, is
a duplicate delivery: the shard's commit marker makes it a no-op).
"""
from __future__ import annotations

import logging
from functools import cached_property

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.enqueuer import GPU_QUEUE, model_queue
from poolq.jobs.coordination.work_units import queue_of
from poolq.jobs.job_handle import JobHandle

log = logging.getLogger(__name__)


class QueueDepths:
    """Each queue's depth, and the models live workers hold, each asked at most once (and only when a
    decision needs it)."""

    def __init__(self, ctx: JobContext) -> None:
        self._ctx = ctx
        self._depths: dict[str, int | None] = {}
        self._held: frozenset[str] | None = None

    def held(self, model: str) -> bool:
        """Some live compute worker holds ``model`` (so its queue has a consumer)."""
        if self._held is None:
            try:
                self._held = frozenset(self._ctx.workers.loaded_models())
            except Exception:  # noqa: BLE001 - unknown: as if none held it (a re-send is the safe side)
                log.warning("reading the models the workers hold failed", exc_info=True)
                self._held = frozenset()
        return model in self._held

    def backlogged(self, queue: str) -> bool:
        if queue not in self._depths:
            try:
                self._depths[queue] = self._ctx.enqueuer.waiting(queue)
            except Exception:  # noqa: BLE001 - unknown depth: fall back to the time rule alone
                log.warning("reading the depth of queue %s failed", queue, exc_info=True)
                self._depths[queue] = None
        return bool(self._depths[queue])


class LostUnits:
    """``lost(unit)`` for one job, from one read of its dispatch times, leases and starts."""

    def __init__(self, job: JobHandle, now: float, queues: QueueDepths) -> None:
        ctx = job.ctx
        self.sent = ctx.status.dispatches(job.id)
        self.started = ctx.leases.last_started(job.id)
        self.running = set(ctx.leases.live_units(job.id))
        self.now, self.queues = now, queues
        self.requeue_after_s = ctx.settings.reliability.requeue_after_s
        self._job = job

    def __call__(self, unit: str) -> bool:
        if unit in self.running:
            return False
        if unit not in self.sent or self.started.get(unit, -1.0) >= self.sent[unit]:
            return True
        return self.now - self.sent[unit] >= self.requeue_after_s and not any(map(self.queues.backlogged, self._queues(unit)))

    def _queues(self, unit: str) -> list[str]:
        """The queues the unit's task may wait in with a consumer: its own, and for a shard (sent to
        the general compute queue, or routed to its model's) its model's queue while a live worker
        holds the model."""
        queue = queue_of(unit)
        if queue != GPU_QUEUE:
            return [queue]
        model = self._model
        return [queue, model_queue(model)] if model is not None and self.queues.held(model) else [queue]

    @cached_property
    def _model(self) -> str | None:
        """The job's model (from its cached status), read once and only if a shard needs it."""
        return self._job.ctx.status.field(self._job.id, "model")
