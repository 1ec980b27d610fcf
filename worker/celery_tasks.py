"""Celery tasks: deserialize, call the plain function, record the outcome. Nothing else.

Retry policy lives in ``failures.py``: retryable errors are retried with backoff and jitter a
bounded number of times; anything else (or retries used up) fails the step for good.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from typing import Callable

from celery import Celery, Task
from celery.exceptions import Reject

from poolq.jobs.context import JobContext, build_context
from poolq.jobs.coordination.enqueuer import (
    BATCH_TASK,
    FINALIZE_TASK,
    PLAN_SECTION_TASK,
    PLAN_TASK,
    RECONCILE_TASK,
    SCHEDULE_TASK,
    SHARD_TASK,
    SINK_TASK,
    WEBHOOK_TASK,
    CeleryEnqueuer,
)
from poolq.jobs.coordination.work_units import FINALIZE_UNIT, PLAN_UNIT, section_unit, shard_unit
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import SectionStage
from poolq.jobs.observability.log_format import log_context
from poolq.jobs.settings import Settings
from poolq.jobs.steps.failures import MAX_RETRIES, describe, fail_job, fail_shard, is_retryable, retry_delay_s
from poolq.jobs.steps.finalizer import finalize_job
from poolq.jobs.steps.plan_section import plan_section
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.shards.shard_runner import run_shard
from poolq.products.batches.batch_advance import advance_batch, give_up_batch
from poolq.products.job_hooks import ProductHooks
from poolq.products.schedules.schedule_runner import run_schedule
from poolq.products.sinks.sink_load import fail_sinks, load_sinks
from poolq.products.webhooks.delivery_slots import DeliverySlots, RedisDeliverySlots
from poolq.products.webhooks.tenant_turns import deliver_in_turn
from poolq.worker.reconciler import reconcile

log = logging.getLogger(__name__)


def build_worker_context(app: Celery, settings: Settings, loads_models: bool = True) -> JobContext:
    return build_context(settings, CeleryEnqueuer(app), settings.broker.redis_client("worker"), hooks=ProductHooks(),
                         loads_models=loads_models)


def register_tasks(app: Celery, settings: Settings, loads_models: bool = True) -> Callable[[], JobContext]:
    """Register poolq's tasks on ``app``; returns how the worker process gets its context, built
    lazily there (``loads_models=False``: a control worker, which never loads a model); the
    interactive lane's thread and the compute presence share it.

    ``shared=False``: the tasks close over this app's settings. Celery's default (shared) would
    also attach them to every app made later in the process, where the first registration wins."""
    holder: dict[str, JobContext] = {}
    # A task, the lane's thread and the presence thread may ask at once: one context, one EnginePool.
    holder_lock = threading.Lock()
    slots_holder: list[DeliverySlots] = []

    def context() -> JobContext:
        with holder_lock:
            if "ctx" not in holder:  # built in the pool child, after fork: no CUDA in the parent
                holder["ctx"] = build_worker_context(app, settings, loads_models)
            return holder["ctx"]

    def delivery_slots() -> DeliverySlots:
        """The tenants' webhook delivery slots, in Redis (one client per process, made on first use)."""
        with holder_lock:
            if not slots_holder:
                slots_holder.append(RedisDeliverySlots(settings.broker.redis_client("worker")))
            return slots_holder[0]

    def run(task: Task, step: Callable[[JobContext], object], give_up: Callable[[JobContext, Exception], object],
            unit: str | None = None, **ids: object) -> None:
        """Run the task's step; everything it logs carries the task, its id and ``ids`` (job_id, shard).
        ``unit`` names the job's unit of work the task runs, if any (its retries are noted as sends).
        What the step and ``give_up`` return is not used."""
        with log_context(task=task.name, task_id=task.request.id, **ids):
            run_step(task, step, give_up, unit, ids.get("job_id"))

    def run_job(task: Task, job_id: str, step: Callable[[JobHandle], object],
                give_up: Callable[[JobHandle, Exception], object], unit: str, **ids: object) -> None:
        """Run a step of job ``job_id``: the job is bound once, and the step and its give-up get the
        handle; what the step logs carries the job's tenant too."""

        def bound_step(ctx: JobContext) -> object:
            job = JobHandle.bind(ctx, job_id)
            with log_context(tenant=job.tenant):
                return step(job)

        run(task, bound_step, lambda ctx, exc: give_up(JobHandle.bind(ctx, job_id), exc), unit, job_id=job_id, **ids)

    def run_step(task: Task, step: Callable[[JobContext], object],
                 give_up: Callable[[JobContext, Exception], object], unit: str | None, job_id: object) -> None:
        ctx = context()
        try:
            step(ctx)
        except Exception as exc:
            if is_retryable(exc) and task.request.retries < MAX_RETRIES:
                log.warning("%s %s: %s; retrying", task.name, task.request.args, describe(exc))
                delay = retry_delay_s(task.request.retries, random.random(), settings.tasks.task_retry_backoff_s,
                                      settings.tasks.task_retry_backoff_max_s)
                if unit is not None:
                    note_retry_sent(ctx, str(job_id), unit)
                # max_retries: Celery's own default (3) would end the retries before MAX_RETRIES,
                # re-raising instead of giving up (the shard would never be committed as failed).
                try:
                    raise task.retry(exc=exc, countdown=delay, max_retries=MAX_RETRIES)
                except Reject:
                    # The retry could not be sent (the broker is down too): the message is dropped
                    # and the reconciler re-sends the unit. A short reason, not the chained
                    # tracebacks, goes back to the pool's parent process.
                    raise Reject(f"retry not sent: {describe(exc)}"[:500], requeue=False) from None
            log.error("%s %s failed for good: %s", task.name, task.request.args, describe(exc))
            give_up(ctx, exc)

    @app.task(name=PLAN_TASK, bind=True, shared=False, soft_time_limit=settings.tasks.plan_soft_time_limit_s,
              time_limit=settings.tasks.plan_time_limit_s)
    def plan_task(self: Task, job_id: str) -> None:
        run_job(self, job_id, plan_job, fail_job, PLAN_UNIT)

    @app.task(name=PLAN_SECTION_TASK, bind=True, shared=False, soft_time_limit=settings.tasks.plan_soft_time_limit_s,
              time_limit=settings.tasks.plan_time_limit_s)
    def plan_section_task(self: Task, job_id: str, stage: str, section: int) -> None:
        planning_stage = SectionStage(stage)
        run_job(self, job_id, lambda job: plan_section(job, planning_stage, section), fail_job,
                section_unit(planning_stage, section), section=section)

    @app.task(name=SHARD_TASK, bind=True, shared=False)
    def shard_task(self: Task, job_id: str, shard: int) -> None:
        run_job(self, job_id, lambda job: run_shard(job, shard), lambda job, exc: fail_shard(job, shard, exc),
                shard_unit(shard), shard=shard)

    @app.task(name=FINALIZE_TASK, bind=True, shared=False)
    def finalize_task(self: Task, job_id: str) -> None:
        run_job(self, job_id, finalize_job, fail_job, FINALIZE_UNIT)

    @app.task(name=SCHEDULE_TASK, bind=True, shared=False)
    def schedule_task(self: Task, schedule_id: str) -> None:
        # Nothing to fail on giving up: the slot's run record says what happened; the next slot runs anew.
        run(self, lambda ctx: run_schedule(ctx, schedule_id), lambda ctx, exc: None, schedule_id=schedule_id)

    @app.task(name=BATCH_TASK, bind=True, shared=False)
    def batch_task(self: Task, tenant: str, batch_id: str) -> None:
        # Giving up leaves the batch where it was for the reconciler's next pass, unless it keeps failing.
        run(self, lambda ctx: advance_batch(ctx, tenant, batch_id), lambda ctx, exc: give_up_batch(ctx, tenant, batch_id, exc),
            batch_id=batch_id)

    @app.task(name=SINK_TASK, bind=True, shared=False)
    def sink_task(self: Task, job_id: str) -> None:
        # A store that cannot be reached is retried (SinkUnavailable); giving up fails the sink, not the job.
        run(self, lambda ctx: load_sinks(JobHandle.bind(ctx, job_id)),
            lambda ctx, exc: fail_sinks(JobHandle.bind(ctx, job_id), exc), job_id=job_id)

    @app.task(name=WEBHOOK_TASK, bind=True, shared=False)
    def webhook_task(self: Task, job_id: str, name: str, attempt: int = 0) -> None:
        # One attempt, in its tenant's turn; the next is a new message, sent with the back-off's
        # countdown (a fresh one: Celery's retry count stays the store failures'). A store failure
        # is retried as any step's; giving up leaves the outcome as the last attempt wrote it.
        run(self, lambda ctx: deliver_in_turn(ctx, delivery_slots(), job_id, name, attempt), lambda ctx, exc: None,
            job_id=job_id, event=name, attempt=attempt)

    @app.task(name=RECONCILE_TASK, bind=True, shared=False)
    def reconcile_task(self: Task) -> None:
        report = reconcile(context())
        if report.recovered or report.resent or report.aborted_uploads:
            log.info("reconcile: %s", report)

    return context


def note_retry_sent(ctx: JobContext, job_id: str, unit: str) -> None:
    """A retry is a new message: note its sending, or the reconciler, seeing the unit consumed and
    not running during the countdown, would send a duplicate. Best effort: if Redis is down, the
    reconciler's duplicate is the (harmless) fallback."""
    try:
        ctx.status.note_dispatch(job_id, [unit], time.time())
    except Exception:  # noqa: BLE001 - never let the bookkeeping stop the retry itself
        log.warning("noting the retry of %s/%s failed", job_id, unit, exc_info=True)
