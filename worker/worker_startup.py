"""One Celery worker process: ``poolq worker --queues ...``, or each process a ``worker_set`` starts.

Its tasks are registered, and a compute worker's pool children say they are alive (one compute
slot each), load the warm models as they start (``model_warmup``: CUDA is first touched in the
pool child) and serve the interactive lane. A compute worker consumes the general ``gpu`` queue and
the queue of each model it holds (model affinity, ``model_queues``): its warm models' from the
start, others' as its children load them. SIGTERM is Celery's warm shutdown: the current shard
finishes first.
"""
from __future__ import annotations

import logging
from typing import Callable

from celery.signals import worker_process_init, worker_process_shutdown
from celery.utils.nodenames import default_nodename, host_format

from poolq.engine.device.hardware import noted_flags
from poolq.jobs.context import JobContext
from poolq.jobs.coordination.enqueuer import model_queue
from poolq.jobs.observability.log_format import configure_logging, use_celery_logging
from poolq.jobs.settings import Settings
from poolq.worker.celery_app import create_celery_app
from poolq.worker.celery_tasks import register_tasks
from poolq.worker.compute_presence import ComputePresence
from poolq.worker.fleet.worker_set import WorkerOptions, check_store
from poolq.worker.lane.lane_startup import lane_in_pool_children
from poolq.worker.model_queues import FOLLOW_INTERVAL_S, ModelQueues
from poolq.worker.model_warmup import models_to_warm, warm_models

log = logging.getLogger(__name__)


def run_worker(settings: Settings, options: WorkerOptions = WorkerOptions()) -> int:
    """Run one prefork worker in this process until it is told to stop; returns its exit code
    (non-zero when Celery stopped it on an unrecoverable error, so a supervisor restarts it)."""
    check_store(settings)
    # Configured now, not only when Celery starts (setup_logging): the start-up line below would
    # otherwise meet a root logger without handlers, and an INFO line would be dropped.
    configure_logging(settings.observability.log_format, options.loglevel)
    use_celery_logging(settings.observability.log_format)
    log.info("worker: device %s, compute dtype %s (requested %s; cpu flags: %s)", settings.serving.device, _said_dtype(settings),
             settings.serving.dtype, ", ".join(noted_flags()) or "none of avx2/avx512*/amx*")
    app = create_celery_app(settings)
    context = register_tasks(app, settings, loads_models=options.computes)
    node = host_format(default_nodename(options.hostname))
    warm = models_to_warm(settings) if options.computes and settings.serving.warm_default_model else []
    warm_queues = frozenset(model_queue(model) for model in warm)
    if options.computes:
        _say_alive_from_each_pool_child(context)
        _follow_models_from_each_pool_child(ModelQueues(
            app.control, node, lambda: context().engines, lambda queue: context().enqueuer.waiting(queue),
            warm_queues, cancels=options.concurrency == 1, grace_s=settings.sharding.worker_heartbeat_s + FOLLOW_INTERVAL_S))
        if warm:
            _warm_each_pool_child(context)
    worker = app.Worker(
        hostname=node,
        pool_cls=options.pool,  # threads for webhook deliveries alone
        loglevel=options.loglevel,
        concurrency=options.concurrency,
        queues=[*options.queues, *sorted(warm_queues)],
        without_gossip=True,
        without_mingle=True,
        max_tasks_per_child=options.max_tasks_per_child,
    )
    # The worker itself, not Celery's command line: app.start drops the exit code click hands it
    # back (a worker stopped by an unrecoverable error exited 0, and a supervisor left it down).
    with lane_in_pool_children(settings, context, options.queues):  # compute workers serve /v1/embeddings
        worker.start()
    return int(worker.exitcode or 0)


def _said_dtype(settings: Settings) -> str:
    """The compute dtype as this parent knows it: ``auto`` on a CUDA device is left to each pool
    child (asking torch here would initialise CUDA before the fork, and no child could use it)."""
    dtype = settings.serving.compute_dtype
    return f"{dtype}, resolved in each worker child" if dtype == "auto" else dtype


def _say_alive_from_each_pool_child(context: Callable[[], JobContext]) -> None:
    """Each pool child of a compute worker counts as one compute slot while it lives (fair share
    hands out that many shards at a time)."""
    presences: list[ComputePresence] = []

    def start(**_: object) -> None:
        presences.append(ComputePresence(context).start())

    def stop(**_: object) -> None:
        for presence in presences:
            presence.stop()

    worker_process_init.connect(start, weak=False)
    worker_process_shutdown.connect(stop, weak=False)


def _warm_each_pool_child(context: Callable[[], JobContext]) -> None:
    """Each pool child of a compute worker loads the warm models when it starts (model_warmup)."""

    def start(**_: object) -> None:
        warm_models(context)

    worker_process_init.connect(start, weak=False)


def _follow_models_from_each_pool_child(model_queues: ModelQueues) -> None:
    """Each pool child of a compute worker has its worker consume the queues of the models it loads
    (model_queues); the object is built in the parent and copied into each child by the fork."""
    followers: list[ModelQueues] = []

    def start(**_: object) -> None:
        followers.append(model_queues.start())

    def stop(**_: object) -> None:
        for follower in followers:
            follower.stop()

    worker_process_init.connect(start, weak=False)
    worker_process_shutdown.connect(stop, weak=False)
