"""Starting poolq's Celery worker processes.

``poolq worker`` runs two kinds of worker, as separate processes under one supervisor: a control
worker (the ``control`` queue: planning, finalizing, the reconciler, schedules, batches), which
never loads a model and so never waits behind a shard, and a compute worker (the ``gpu`` queue:
shards, and the interactive lane). ``--gpus 0,1`` starts one compute worker per GPU, each with
``CUDA_VISIBLE_DEVICES`` set to its GPU, concurrency 1 and ``max_tasks_per_child`` (so a child's
GPU memory is returned now and then). ``--queues`` runs one plain worker on the queues it names
(a deployment that runs each kind on its own). CUDA is first touched in the pool child, which
loads the default model as it starts (``model_warmup``). A worker that dies is started again (``worker_supervisor``);
SIGTERM is passed to every worker, which finishes its current shard (Celery's warm shutdown).
"""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

from celery.signals import worker_process_init, worker_process_shutdown
from celery.utils.nodenames import default_nodename, host_format

from poolq.engine.hardware import noted_flags
from poolq.jobs.context import JobContext
from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE
from poolq.jobs.observability.log_format import configure_logging, use_celery_logging
from poolq.jobs.settings import Settings
from poolq.jobs.worker.celery_app import create_celery_app
from poolq.jobs.worker.compute_presence import ComputePresence
from poolq.jobs.worker.lane_startup import lane_in_pool_children
from poolq.jobs.worker.model_warmup import warm_default_model
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

    @property
    def computes(self) -> bool:
        """It consumes the shards (and loads models); a control-only worker never does."""
        return GPU_QUEUE in self.queues


def check_store(settings: Settings) -> None:
    """Refuse to start against a store that ignores conditional writes (the ledger needs them)."""
    if settings.require_conditional_writes:
        verify_conditional_writes(settings.object_store(), f"{settings.output_prefix}/_probes")


def run_worker(settings: Settings, options: WorkerOptions = WorkerOptions()) -> int:
    """Run one prefork worker in this process until it is told to stop; returns its exit code
    (non-zero when Celery stopped it on an unrecoverable error, so a supervisor restarts it)."""
    check_store(settings)
    # Configured now, not only when Celery starts (setup_logging): the start-up line below would
    # otherwise meet a root logger without handlers, and an INFO line would be dropped.
    configure_logging(settings.log_format, options.loglevel)
    use_celery_logging(settings.log_format)
    log.info("worker: device %s, compute dtype %s (requested %s; cpu flags: %s)", settings.device, settings.compute_dtype,
             settings.dtype, ", ".join(noted_flags()) or "none of avx2/avx512*/amx*")
    app = create_celery_app(settings)
    context = register_tasks(app, settings, loads_models=options.computes)
    if options.computes:
        _say_alive_from_each_pool_child(context)
        if settings.warm_default_model:
            _warm_each_pool_child(context)
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
    """Each pool child of a compute worker loads the default model when it starts (model_warmup)."""

    def start(**_: object) -> None:
        warm_default_model(context)

    worker_process_init.connect(start, weak=False)


def _worker_argv(executable: str, options: WorkerOptions, name: str, queues: tuple[str, ...],
                 concurrency: int) -> list[str]:
    argv = [executable, "-m", "poolq.api", "worker", "--concurrency", str(concurrency), "--queues", ",".join(queues),
            "--loglevel", options.loglevel, "--hostname", f"{options.hostname or 'poolq'}-{name}@%h"]
    if options.max_tasks_per_child:
        argv += ["--max-tasks-per-child", str(options.max_tasks_per_child)]
    return argv


def control_worker_command(options: WorkerOptions, control_concurrency: int, executable: str = sys.executable,
                           environ: Mapping[str, str] = os.environ) -> WorkerCommand:
    """The control worker: never loads a model, so planning and finalizing never wait behind a shard."""
    argv = _worker_argv(executable, options, "control", (CONTROL_QUEUE,), control_concurrency)
    return WorkerCommand("control", argv, dict(environ))


def compute_worker_commands(options: WorkerOptions, gpus: list[str] | None = None, executable: str = sys.executable,
                            environ: Mapping[str, str] = os.environ) -> list[WorkerCommand]:
    """The workers on ``options.queues`` (the compute ones: the gpu queue): one per GPU
    (``environ`` plus its GPU), or one on ``device`` with ``options.concurrency`` pool children."""
    if gpus is None:
        argv = _worker_argv(executable, options, "compute", options.queues, options.concurrency)
        return [WorkerCommand("compute", argv, dict(environ))]
    return [WorkerCommand(f"gpu{gpu}", _worker_argv(executable, options, f"gpu{gpu}", options.queues, 1),
                          {**environ, "CUDA_VISIBLE_DEVICES": gpu, "POOLQ_DEVICE": "cuda"}) for gpu in gpus]


def run_worker_set(settings: Settings, options: WorkerOptions, gpus: list[str] | None = None, *, control: bool = True,
                   policy: RestartPolicy = RestartPolicy()) -> int:
    """Start the compute worker(s) on ``options.queues`` (with ``control``, a control worker too)
    and keep them running (``WorkerSupervisor``); returns the exit code."""
    check_store(settings)
    configure_logging(settings.log_format, options.loglevel)  # the supervisor's restarts, as the workers log
    commands = [control_worker_command(options, settings.control_concurrency)] if control else []
    commands += compute_worker_commands(options, gpus)
    supervisor = WorkerSupervisor(commands, policy)
    supervisor.install_signal_handlers()
    return supervisor.run()
