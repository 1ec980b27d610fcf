"""How work is handed on: to Celery queues, or run right here for in-process use."""
from __future__ import annotations

import hashlib
import threading
from abc import ABC, abstractmethod
from collections import deque
from typing import Callable

# Task names and queues, declared once; tasks.py registers handlers under these names.
PLAN_TASK = "poolq.plan_job"
PLAN_SECTION_TASK = "poolq.plan_section"  # args [job_id, stage ("scan" | "cut"), section]
SHARD_TASK = "poolq.run_shard"
FINALIZE_TASK = "poolq.finalize_job"
RECONCILE_TASK = "poolq.reconcile"
SCHEDULE_TASK = "poolq.run_schedule"  # sent by beat (RedBeat entries), args [schedule_id]
BATCH_TASK = "poolq.advance_batch"  # args [tenant, batch_id]: the batch's next step (products/batches/)
SINK_TASK = "poolq.load_sinks"  # args [job_id]: load a finished job's rows into its sink (products/sinks/)
WEBHOOK_TASK = "poolq.deliver_webhook"  # args [job_id, event name, attempt]: one event's delivery (products/webhooks/)
CONTROL_QUEUE = "control"
# Webhook deliveries, on a worker of their own (a thread pool, worker/fleet/worker_set.py): a receiver that
# trickles or never answers holds one of its threads, never a slot that planning or finalizing needs.
WEBHOOK_QUEUE = "webhooks"
GPU_QUEUE = "gpu"  # the general compute queue: every compute worker consumes it
MODEL_QUEUE_PREFIX = "gpu.model."  # + a model's digest: consumed by the compute workers holding the model


def model_queue(model: str) -> str:
    """The queue of shards routed to the workers holding ``model`` (``shard_routing.py``): named by a
    digest, as a model name (``org/name@<commit>``, a local path) is no fit for a queue name."""
    return MODEL_QUEUE_PREFIX + hashlib.sha256(model.encode()).hexdigest()[:12]


class Enqueuer(ABC):
    """Schedules the steps of a job: plan (and its sections' stages), one task per shard, finalize."""

    @abstractmethod
    def plan(self, job_id: str) -> None: ...

    @abstractmethod
    def plan_section(self, job_id: str, stage: str, section: int) -> None: ...

    @abstractmethod
    def run_shard(self, job_id: str, shard: int) -> None:
        """Send the shard's task to the general compute queue."""

    def run_shard_on(self, job_id: str, shard: int, queue: str) -> None:
        """Send the shard's task to ``queue``: a model's queue (``model_queue``) or the general one.
        An enqueuer with one place to run every task (in process, a test's double) runs it as ``run_shard``."""
        self.run_shard(job_id, shard)

    @abstractmethod
    def finalize(self, job_id: str) -> None: ...

    def advance_batch(self, tenant: str, batch_id: str) -> None:
        """Move an OpenAI-style batch along (read its input, or write its files); idempotent."""
        raise NotImplementedError(f"{type(self).__name__} does not run batches")

    def load_sinks(self, job_id: str, countdown_s: float = 0.0) -> None:
        """Load a finished job's rows into the sink it names (products/sinks/sink_load.py) in ``countdown_s``; idempotent."""
        raise NotImplementedError(f"{type(self).__name__} does not load sinks")

    def deliver_webhook(self, job_id: str, name: str, attempt: int = 0, countdown_s: float = 0.0) -> None:
        """Make attempt ``attempt`` (0: the first) of the job's webhook event ``name`` (written to its
        ledger) in ``countdown_s``."""
        raise NotImplementedError(f"{type(self).__name__} delivers no webhooks")

    def waiting(self, queue: str) -> int | None:
        """Messages waiting in ``queue`` (sent, not yet delivered); None where that is unknown."""
        return None


class CeleryEnqueuer(Enqueuer):
    """Sends tasks by name, so the API never imports the worker's code (or torch)."""

    def __init__(self, celery_app) -> None:
        self.app = celery_app

    def plan(self, job_id: str) -> None:
        self.app.send_task(PLAN_TASK, args=[job_id], queue=CONTROL_QUEUE)

    def plan_section(self, job_id: str, stage: str, section: int) -> None:
        self.app.send_task(PLAN_SECTION_TASK, args=[job_id, stage, section], queue=CONTROL_QUEUE)

    def run_shard(self, job_id: str, shard: int) -> None:
        self.run_shard_on(job_id, shard, GPU_QUEUE)

    def run_shard_on(self, job_id: str, shard: int, queue: str) -> None:
        self.app.send_task(SHARD_TASK, args=[job_id, shard], queue=queue)

    def finalize(self, job_id: str) -> None:
        self.app.send_task(FINALIZE_TASK, args=[job_id], queue=CONTROL_QUEUE)

    def advance_batch(self, tenant: str, batch_id: str) -> None:
        self.app.send_task(BATCH_TASK, args=[tenant, batch_id], queue=CONTROL_QUEUE)

    def load_sinks(self, job_id: str, countdown_s: float = 0.0) -> None:
        self.app.send_task(SINK_TASK, args=[job_id], queue=CONTROL_QUEUE, countdown=countdown_s or None)

    def deliver_webhook(self, job_id: str, name: str, attempt: int = 0, countdown_s: float = 0.0) -> None:
        self.app.send_task(WEBHOOK_TASK, args=[job_id, name, attempt], queue=WEBHOOK_QUEUE, countdown=countdown_s or None)

    def waiting(self, queue: str) -> int | None:
        # A passive declare reports the queue's depth on any kombu transport (Redis: the list's length).
        with self.app.connection_for_read() as connection:
            try:
                return connection.default_channel.queue_declare(queue=queue, passive=True).message_count
            except connection.channel_errors:
                return 0  # no such queue (Redis drops an empty list): nothing waits in it


class InlineEnqueuer(Enqueuer):
    """Runs each step in this process, in FIFO order, when the outermost call returns to it."""

    def __init__(self) -> None:
        self._queue: deque[Callable[[], None]] = deque()
        self._draining = False
        self.handlers: dict[str, Callable] = {}

    def bind(self, plan: Callable, plan_section: Callable, run_shard: Callable, finalize: Callable,
             advance_batch: Callable | None = None, load_sinks: Callable | None = None) -> None:
        self.handlers = {PLAN_TASK: plan, PLAN_SECTION_TASK: plan_section, SHARD_TASK: run_shard, FINALIZE_TASK: finalize}
        if advance_batch is not None:
            self.handlers[BATCH_TASK] = advance_batch
        if load_sinks is not None:
            self.handlers[SINK_TASK] = load_sinks

    def _submit(self, name: str, *args) -> None:
        self._queue.append(lambda: self.handlers[name](*args))
        if self._draining:
            return
        self._draining = True
        try:
            while self._queue:
                self._queue.popleft()()
        finally:
            self._draining = False

    def plan(self, job_id: str) -> None:
        self._submit(PLAN_TASK, job_id)

    def plan_section(self, job_id: str, stage: str, section: int) -> None:
        self._submit(PLAN_SECTION_TASK, job_id, stage, section)

    def run_shard(self, job_id: str, shard: int) -> None:
        self._submit(SHARD_TASK, job_id, shard)

    def finalize(self, job_id: str) -> None:
        self._submit(FINALIZE_TASK, job_id)

    def advance_batch(self, tenant: str, batch_id: str) -> None:
        self._submit(BATCH_TASK, tenant, batch_id)

    def load_sinks(self, job_id: str, countdown_s: float = 0.0) -> None:
        if countdown_s > 0:  # in process, a load of the job runs in another thread: come back after it
            timer = threading.Timer(countdown_s, self.load_sinks, (job_id,))
            timer.daemon = True
            timer.start()
            return
        self._submit(SINK_TASK, job_id)
