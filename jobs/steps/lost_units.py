"""Which of a job's units look lost: their task is neither running nor (likely) waiting in a queue.

Used by the reconciler for every unit, and by the planner for its section tasks. A unit is lost
when it is not running and its task was consumed since it was last sent (its attempt died), or
was never sent as far as Redis knows, or was sent long ago to a queue that now holds nothing.
A task sent long ago is re-sent only while its queue is empty: under a backlog it is most likely
still waiting there, and re-sending would grow the backlog with duplicates.
"""
from __future__ import annotations

import logging

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.work_units import queue_of
from poolq.jobs.job_handle import JobHandle

log = logging.getLogger(__name__)


class QueueDepths:
    """Each queue's depth, asked at most once (and only when a decision needs it)."""

    def __init__(self, ctx: JobContext) -> None:
        self._ctx = ctx
        self._depths: dict[str, int | None] = {}

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
        self.requeue_after_s = ctx.settings.requeue_after_s

    def __call__(self, unit: str) -> bool:
        if unit in self.running:
            return False
        if unit not in self.sent or self.started.get(unit, -1.0) >= self.sent[unit]:
            return True
        return self.now - self.sent[unit] >= self.requeue_after_s and not self.queues.backlogged(queue_of(unit))
