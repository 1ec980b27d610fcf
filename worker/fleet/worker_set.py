"""What ``poolq worker`` starts: its options, and the set of worker processes it keeps running.

A control worker (the ``control`` queue: planning, finalizing, the reconciler, schedules,
batches), which never loads a model and so never waits behind a shard; a webhook worker (the
``webhooks`` queue: deliveries, on a pool of threads, as they wait on receivers, not on the CPU),
so that no receiver holds a slot planning or finalizing needs; and a compute worker (the
``gpu`` queue: shards and the interactive lane), or one compute worker per GPU (``--gpus 0,1``,
GPU UUIDs or MIG ids, see gpu_selection: each with ``CUDA_VISIBLE_DEVICES`` set to its GPU,
concurrency 1 and ``max_tasks_per_child``, so a child's GPU memory is returned now and then).
Each is a ``poolq worker --queues ...`` process of its own (``worker_startup.run_worker``;
``--queues`` alone runs one such plain worker, for a deployment that runs each kind on its own)
under one ``WorkerSupervisor``, which starts a worker that dies again and passes SIGTERM to
every worker. This module imports neither Celery nor the job steps: the supervisor only checks
the store and starts processes, so it starts in a fraction of a worker's import time.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace

from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE, WEBHOOK_QUEUE
from poolq.jobs.observability.log_format import configure_logging
from poolq.jobs.settings import Settings
from poolq.storage import verify_conditional_writes
from poolq.worker.fleet.gpu_selection import gpu_slots
from poolq.worker.fleet.worker_supervisor import RestartPolicy, WorkerCommand, WorkerSupervisor


@dataclass(frozen=True)
class WorkerOptions:
    concurrency: int = 1
    loglevel: str = "INFO"
    hostname: str | None = None
    queues: tuple[str, ...] = (CONTROL_QUEUE, GPU_QUEUE, WEBHOOK_QUEUE)  # one worker doing everything (tests)
    max_tasks_per_child: int | None = None

    @property
    def computes(self) -> bool:
        """It consumes the shards (and loads models); a control-only worker never does."""
        return GPU_QUEUE in self.queues

    @property
    def pool(self) -> str:
        """Celery's pool: threads for a worker of webhook deliveries alone (``concurrency`` threads,
        each waiting on a receiver), else processes."""
        return "threads" if set(self.queues) == {WEBHOOK_QUEUE} else "prefork"


def check_store(settings: Settings) -> None:
    """Refuse to start against a store that ignores conditional writes (the ledger needs them)."""
    if settings.storage.require_conditional_writes:
        verify_conditional_writes(settings.storage.object_store(), f"{settings.storage.output_prefix}/_probes")


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


def webhook_worker_command(options: WorkerOptions, webhook_concurrency: int, executable: str = sys.executable,
                           environ: Mapping[str, str] = os.environ) -> WorkerCommand:
    """The webhook worker: deliveries on ``webhook_concurrency`` threads, apart from the control work."""
    # No --max-tasks-per-child: a thread pool has no children to replace.
    argv = _worker_argv(executable, replace(options, max_tasks_per_child=None), "webhooks", (WEBHOOK_QUEUE,),
                        webhook_concurrency)
    return WorkerCommand("webhooks", argv, dict(environ))


def compute_worker_commands(options: WorkerOptions, gpus: list[str] | None = None, executable: str = sys.executable,
                            environ: Mapping[str, str] = os.environ) -> list[WorkerCommand]:
    """The workers on ``options.queues`` (the compute ones: the gpu queue): one per GPU of ``gpus``
    (``--gpus`` entries: ``environ`` plus its GPU, an index counting within the inherited
    ``CUDA_VISIBLE_DEVICES``, see gpu_selection), or one on ``device`` with ``options.concurrency`` pool children."""
    if gpus is None:
        argv = _worker_argv(executable, options, "compute", options.queues, options.concurrency)
        return [WorkerCommand("compute", argv, dict(environ))]
    return [WorkerCommand(slot.name, _worker_argv(executable, options, slot.name, options.queues, 1),
                          {**environ, "CUDA_VISIBLE_DEVICES": slot.visible_devices, "POOLQ_DEVICE": "cuda"})
            for slot in gpu_slots(gpus, environ.get("CUDA_VISIBLE_DEVICES"))]


def run_worker_set(settings: Settings, options: WorkerOptions, gpus: list[str] | None = None, *, control: bool = True,
                   policy: RestartPolicy = RestartPolicy()) -> int:
    """Start the compute worker(s) on ``options.queues`` (with ``control``, a control worker and a
    webhook worker too) and keep them running (``WorkerSupervisor``); returns the exit code."""
    check_store(settings)
    configure_logging(settings.observability.log_format, options.loglevel)  # the supervisor's restarts, as the workers log
    commands = [control_worker_command(options, settings.sharding.control_concurrency),
                webhook_worker_command(options, settings.webhooks.webhook_concurrency)] if control else []
    commands += compute_worker_commands(options, gpus)
    supervisor = WorkerSupervisor(commands, policy)
    supervisor.install_signal_handlers()
    return supervisor.run()
