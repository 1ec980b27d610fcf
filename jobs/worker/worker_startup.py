"""Starting poolq's Celery worker processes: one worker, or one per GPU.

``--gpus 0,1`` starts one prefork worker per GPU, each with ``CUDA_VISIBLE_DEVICES`` set to its
GPU, concurrency 1 and ``max_tasks_per_child`` (so a child's GPU memory is returned now and
then). CUDA is first touched in the pool child, when the first shard loads its model. A worker
that dies is started again (``worker_supervisor``); SIGTERM is passed to every worker, which
finishes its current shard (Celery's warm shutdown) and exits.
"""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from celery.utils.nodenames import default_nodename, host_format

from poolq.engine.hardware import noted_flags
from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE
from poolq.jobs.observability.log_format import configure_logging, use_celery_logging
from poolq.jobs.settings import Settings
from poolq.jobs.worker.celery_app import create_celery_app
from poolq.jobs.worker.lane_startup import lane_in_pool_children
from poolq.jobs.worker.tasks import register_tasks
from poolq.jobs.worker.worker_supervisor import RestartPolicy, WorkerCommand, WorkerSupervisor
from poolq.storage import verify_conditional_writes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerOptions:
    concurrency: int = 1
    loglevel: str = "INFO"
    hostname: str | None = None
    queues: tuple[str, ...] = (CONTROL_QUEUE, GPU_QUEUE)
    max_tasks_per_child: int | None = None


def check_store(settings: Settings) -> None:
    """Refuse to start against a store that ignores conditional writes (the ledger needs them)."""
    if settings.require_conditional_writes:
        verify_conditional_writes(settings.object_store(), f"{settings.output_prefix}/_probes")


def run_worker(settings: Settings, options: WorkerOptions = WorkerOptions()) -> int:
    """Run one prefork worker in this process until it is told to stop; returns its exit code
    (non-zero when Celery stopped it on an unrecoverable error, so a supervisor restarts it)."""
    check_store(settings)
    use_celery_logging(settings.log_format)
    log.info("worker: device %s, compute dtype %s (requested %s; cpu flags: %s)", settings.device, settings.compute_dtype,
             settings.dtype, ", ".join(noted_flags()) or "none of avx2/avx512*/amx*")
    app = create_celery_app(settings)
    context = register_tasks(app, settings)
    worker = app.Worker(
        hostname=host_format(default_nodename(options.hostname)),
        pool_cls="prefork",
        loglevel=options.loglevel,
        concurrency=options.concurrency,
        queues=list(options.queues),
        without_gossip=True,
        without_mingle=True,
        max_tasks_per_child=options.max_tasks_per_child,
    )
    # The worker itself, not Celery's command line: app.start drops the exit code click hands it
    # back (a worker stopped by an unrecoverable error exited 0, and a supervisor left it down).
    with lane_in_pool_children(settings, context, options.queues):  # compute workers serve /v1/embeddings
        worker.start()
    return int(worker.exitcode or 0)


def gpu_worker_commands(gpus: list[str], options: WorkerOptions, executable: str = sys.executable,
                        environ: Mapping[str, str] = os.environ) -> list[WorkerCommand]:
    """The command line and environment of each per-GPU worker (``environ`` plus its GPU)."""
    commands = []
    for gpu in gpus:
        argv = [executable, "-m", "poolq.api", "worker", "--concurrency", "1", "--queues", ",".join(options.queues),
                "--loglevel", options.loglevel, "--hostname", f"{options.hostname or 'poolq'}-gpu{gpu}@%h"]
        if options.max_tasks_per_child:
            argv += ["--max-tasks-per-child", str(options.max_tasks_per_child)]
        env = {**environ, "CUDA_VISIBLE_DEVICES": gpu, "POOLQ_DEVICE": "cuda"}
        commands.append(WorkerCommand(f"gpu{gpu}", argv, env))
    return commands


def run_gpu_workers(settings: Settings, gpus: list[str], options: WorkerOptions,
                    policy: RestartPolicy = RestartPolicy()) -> int:
    """Start one worker per GPU and keep them running (``WorkerSupervisor``); returns the exit code."""
    check_store(settings)
    configure_logging(settings.log_format, options.loglevel)  # the supervisor's restarts, as the workers log
    supervisor = WorkerSupervisor(gpu_worker_commands(gpus, options), policy)
    supervisor.install_signal_handlers()
    return supervisor.run()
