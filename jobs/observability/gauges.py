"""The system's live state, read when ``/metrics`` is scraped: unfinished jobs by state, messages
waiting in each Celery queue, shards being worked on.

Unfinished jobs come from the status store's index of active jobs (``all_active_ids``: one set,
kept with the per-tenant ones) and each job's cached state: O(unfinished jobs) per scrape,
never a walk over every job ever run. A job still in the index whose state is terminal (it was
failed without its manifest) is not counted. Jobs submitted before that set existed (an
upgrade) are not counted until they finish.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

from kombu.transport.redis import PRIORITY_STEPS, Channel

from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE, WEBHOOK_QUEUE
from poolq.jobs.coordination.leases import LeaseStore, RedisLeaseStore
from poolq.jobs.coordination.status_store import JobStatusStore
from poolq.jobs.spec.job_state import JobState

UNFINISHED_STATES = tuple(state for state in JobState if not state.is_terminal)
QUEUES = (CONTROL_QUEUE, GPU_QUEUE, WEBHOOK_QUEUE)  # webhooks: a delivery backlog shows in /metrics too
_SHARD_UNIT_PREFIX = "shard-"  # how dispatch.shard_unit names a shard's unit


class SystemGauges(ABC):
    """Live gauges; every method is a read (no state is kept here)."""

    def __init__(self, status: JobStatusStore) -> None:
        self.status = status

    def jobs_by_state(self) -> dict[str, int]:
        """Unfinished jobs (queued, running, cancelling) per state; every state present, maybe 0."""
        counts = {state.value: 0 for state in UNFINISHED_STATES}
        for job_id in self.status.all_active_ids():
            state = self.status.field(job_id, "status")
            if state in counts:
                counts[state] += 1
        return counts

    @abstractmethod
    def queue_depths(self) -> dict[str, int]:
        """Queue name -> messages waiting in it (sent, not yet taken by a worker)."""

    @abstractmethod
    def shards_in_flight(self) -> int:
        """Shards with a live lease: an attempt is working on them now."""


class RedisSystemGauges(SystemGauges):
    """Reads the broker's lists and the lease keys in the Redis every process shares.

    kombu's Redis transport keeps a queue as a list named after it, plus one list per priority
    step (``<queue>\\x06\\x16<step>``) when messages carry priorities; all of them are summed.
    Shard leases are counted with one SCAN of ``poolq:lease:*:shard-*``.
    """

    def __init__(self, redis_client, status: JobStatusStore, queues: tuple[str, ...] = QUEUES) -> None:
        super().__init__(status)
        self.redis = redis_client
        self.queues = queues

    def queue_depths(self) -> dict[str, int]:
        pipe = self.redis.pipeline(transaction=False)
        for queue in self.queues:
            for step in PRIORITY_STEPS:
                pipe.llen(f"{queue}{Channel.sep}{step}" if step else queue)
        sizes = iter(pipe.execute())
        return {queue: sum(next(sizes) for _ in PRIORITY_STEPS) for queue in self.queues}

    def shards_in_flight(self) -> int:
        pattern = RedisLeaseStore._lease_key("*", f"{_SHARD_UNIT_PREFIX}*")
        return sum(1 for _ in self.redis.scan_iter(match=pattern, count=1000))


class InMemorySystemGauges(SystemGauges):
    """For in-process runs and tests: steps run inline, so nothing ever waits in a queue."""

    def __init__(self, status: JobStatusStore, leases: LeaseStore, queues: tuple[str, ...] = QUEUES) -> None:
        super().__init__(status)
        self.leases = leases
        self.queues = queues

    def queue_depths(self) -> dict[str, int]:
        return {queue: 0 for queue in self.queues}

    def shards_in_flight(self) -> int:
        return sum(
            unit.startswith(_SHARD_UNIT_PREFIX)
            for job_id in self.status.all_active_ids()
            for unit in self.leases.live_units(job_id)
        )


def gauges_for(status: JobStatusStore, leases: LeaseStore) -> SystemGauges:
    """The gauges matching a context's stores: Redis ones over Redis leases, else in-memory ones."""
    if isinstance(leases, RedisLeaseStore):
        return RedisSystemGauges(leases.redis, status)
    return InMemorySystemGauges(status, leases)
