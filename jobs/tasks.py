"""Celery tasks: deserialize, call the plain function, record the outcome. Nothing else."""
from __future__ import annotations

import random
from typing import Callable

import redis
from celery import Celery, Task

from .context import JobContext
from .enqueuer import FINALIZE_TASK, PLAN_TASK, SHARD_TASK, CeleryEnqueuer
from .failures import MAX_RETRIES, RETRY_BACKOFF_MAX_S, fail_job, is_retryable
from .finalizer import finalize_job
from .planner import plan_job
from .settings import Settings
from .shard_runner import run_shard
from .status_store import RedisJobStatusStore


def build_worker_context(app: Celery, settings: Settings) -> JobContext:
    from engine import ModelRegistry

    return JobContext(
        settings=settings,
        store=settings.object_store(),
        status=RedisJobStatusStore(redis.Redis.from_url(settings.redis_url)),
        enqueuer=CeleryEnqueuer(app),
        registry=ModelRegistry.with_packaged_models(settings.models),
    )


def register_tasks(app: Celery, settings: Settings) -> None:
    """Register poolq's tasks on ``app``; the context is built lazily in the worker process."""
    holder: dict[str, JobContext] = {}

    def context() -> JobContext:
        if "ctx" not in holder:  # built in the pool child, after fork: no CUDA in the parent
            holder["ctx"] = build_worker_context(app, settings)
        return holder["ctx"]

    def run(task: Task, job_id: str, step: Callable[[JobContext], object]) -> None:
        ctx = context()
        try:
            step(ctx)
        except Exception as exc:
            if is_retryable(exc) and task.request.retries < MAX_RETRIES:
                countdown = min(RETRY_BACKOFF_MAX_S, 2**task.request.retries) * (0.5 + random.random())
                raise task.retry(exc=exc, countdown=countdown)
            fail_job(job_id, exc, ctx)
            raise

    @app.task(name=PLAN_TASK, bind=True)
    def plan_task(self: Task, job_id: str) -> None:
        run(self, job_id, lambda ctx: plan_job(job_id, ctx))

    @app.task(name=SHARD_TASK, bind=True)
    def shard_task(self: Task, job_id: str, shard: int) -> None:
        run(self, job_id, lambda ctx: run_shard(job_id, shard, ctx))

    @app.task(name=FINALIZE_TASK, bind=True)
    def finalize_task(self: Task, job_id: str) -> None:
        run(self, job_id, lambda ctx: finalize_job(job_id, ctx))
