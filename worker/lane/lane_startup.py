"""A compute worker's pool children serve the interactive lane (``poolq.jobs.lane``).

Each pool child starts a :class:`LaneServer` thread when Celery starts it (``worker_process_init``,
after fork: no model or CUDA in the parent) and stops it when the child exits, letting the request
in hand finish. The thread uses the child's own job context, built lazily by ``register_tasks``,
so lane requests and shard tasks share one EnginePool: one model load, one engine, and a lane
request runs between two steps of the shard in progress. A worker that does not consume the gpu
queue (a control worker) serves no lane and never loads a model for it.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from celery.signals import worker_process_init, worker_process_shutdown

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.enqueuer import GPU_QUEUE
from poolq.jobs.lane.redis_lane import RedisEmbeddingLane
from poolq.jobs.settings import Settings
from poolq.worker.lane.lane_server import LaneServer

log = logging.getLogger(__name__)


@contextmanager
def lane_in_pool_children(settings: Settings, context: Callable[[], JobContext], queues: Sequence[str]) -> Iterator[None]:
    """While the block runs (the worker), every pool child it starts serves the lane, if ``queues``
    holds the gpu queue."""
    if GPU_QUEUE not in queues:
        yield
        return
    servers: list[LaneServer] = []

    def start(**_: object) -> None:
        try:
            servers.append(LaneServer(RedisEmbeddingLane.from_settings(settings), lambda: context().engines).start())
        except Exception:  # noqa: BLE001 - the child still runs shards; the lane's callers get 503
            log.exception("this worker process cannot serve the interactive lane")

    def stop(**_: object) -> None:
        for server in servers:
            server.stop(settings.lane.embeddings_timeout_s)  # the request in hand is worth finishing

    # weak=False: the receivers are closures, which a weak reference would let go at once.
    worker_process_init.connect(start, weak=False)
    worker_process_shutdown.connect(stop, weak=False)
    try:
        yield
    finally:
        worker_process_init.disconnect(start)
        worker_process_shutdown.disconnect(stop)
