"""The API process's job context: Redis status, Celery enqueuer, the configured store."""
from __future__ import annotations

import redis

from engine import ModelRegistry
from jobs.celery_app import create_celery_app
from jobs.context import JobContext
from jobs.enqueuer import CeleryEnqueuer
from jobs.leases import RedisLeaseStore
from jobs.settings import Settings
from jobs.status_store import RedisJobStatusStore


def api_context(settings: Settings) -> JobContext:
    """Built once at app start-up. Sends tasks by name: the API never loads a model or torch."""
    client = redis.Redis.from_url(settings.redis_url)
    return JobContext(
        settings=settings,
        store=settings.object_store(),
        status=RedisJobStatusStore(client),
        leases=RedisLeaseStore(client),
        enqueuer=CeleryEnqueuer(create_celery_app(settings)),
        registry=ModelRegistry.with_packaged_models(settings.models),
    )
