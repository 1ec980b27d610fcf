"""The API process's services: Redis status and leases, the Celery enqueuer, the store, limits."""
from __future__ import annotations

from dataclasses import dataclass

from poolq.api.server.guards.rate_limit import RateLimiter, RedisRateLimiter
from poolq.jobs import CeleryEnqueuer, EmbeddingLane, JobContext, RedisEmbeddingLane, Settings, build_context
from poolq.products.job_hooks import ProductHooks
from poolq.worker import create_celery_app


@dataclass(frozen=True)
class ApiServices:
    ctx: JobContext
    limiter: RateLimiter  # per tenant
    auth_failures: RateLimiter  # failed authentications per client address
    checks: list  # (name, probe) pairs for /readyz
    lane: EmbeddingLane  # POST /v1/embeddings to the compute workers


def api_services(settings: Settings) -> ApiServices:
    """Built once at app start-up. Sends tasks by name: the API never loads a model or torch."""
    client = settings.broker.redis_client("api")  # every call with the API's deadlines: a stall is a 503, not a hang
    ctx = build_context(settings, CeleryEnqueuer(create_celery_app(settings, "api")), client, hooks=ProductHooks(), role="api")
    store = ctx.store
    return ApiServices(
        ctx=ctx,
        limiter=RedisRateLimiter(client, settings.limits.rate_limit_per_s, settings.limits.rate_limit_burst),
        auth_failures=RedisRateLimiter(client, settings.access.auth_failure_rate_per_s, settings.access.auth_failure_burst,
                                       namespace="authfail"),
        checks=[("redis", client.ping), ("store", lambda: store.exists("_readyz"))],
        lane=RedisEmbeddingLane(client),
    )
