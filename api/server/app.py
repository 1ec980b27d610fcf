"""The FastAPI application."""
from __future__ import annotations

from typing import Callable

import anyio
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from poolq.api.server.dashboard import install_dashboard
from poolq.api.server.docs_pages import install_docs_pages
from poolq.api.server.guards.body_limit import MULTIPART_OVERHEAD_BYTES, BodySizeLimitMiddleware
from poolq.api.server.guards.client_address import TrustedProxies, TrustedProxyMiddleware
from poolq.api.server.guards.disconnects import install_disconnect_handler
from poolq.api.server.guards.rate_limit import InMemoryRateLimiter, RateLimiter
from poolq.api.server.guards.unavailable import RETRY_AFTER_S, install_unavailable_handlers
from poolq.api.server.openai_errors import install_error_answers
from poolq.api.server.routes import embeddings, estimates, jobs, models, openai_batches, openai_files, schedules, uploads
from poolq.api.server.routes import sinks as sink_routes
from poolq.api.server.routes.job_details import router as job_details_router
from poolq.api.server.routes.metrics import install_metrics
from poolq.jobs import ApiKeyStore, EmbeddingLane, InMemoryEmbeddingLane, JobContext, Settings, SystemGauges, gauges_for

Check = tuple[str, Callable[[], object]]


def create_app(
    ctx: JobContext | None = None,
    settings: Settings | None = None,
    *,
    limiter: RateLimiter | None = None,
    auth_failures: RateLimiter | None = None,
    checks: list[Check] | None = None,
    gauges: SystemGauges | None = None,
    lane: EmbeddingLane | None = None,
) -> FastAPI:
    """The API for ``settings`` (default: from POOLQ_* env). ``ctx``, the limiters, ``checks``,
    ``gauges`` and ``lane`` replace the Redis-backed defaults (in-process use and tests; a ``ctx``
    without a ``lane`` gets one nobody serves: /v1/embeddings answers 503)."""
    if isinstance(ctx, Settings):  # create_app(settings), as callers wrote it before ctx came first
        raise TypeError("create_app's first argument is a JobContext; pass settings by name: create_app(settings=...)")
    settings = settings or Settings()
    if ctx is None:
        from poolq.api.server.services import api_services

        services = api_services(settings)
        ctx, limiter, auth_failures, checks = services.ctx, services.limiter, services.auth_failures, services.checks
        lane = services.lane
    # docs_url/redoc_url None: FastAPI's pages load their assets from a CDN; install_docs_pages serves ours.
    app = FastAPI(title="poolq", version="1", description="Async jobs for pooling models: embed corpora into Parquet.",
                  docs_url=None, redoc_url=None)
    install_docs_pages(app)
    install_dashboard(app)
    app.state.ctx = ctx
    app.state.keys = ApiKeyStore.from_settings(ctx.store, settings)
    app.state.limiter = limiter or InMemoryRateLimiter(settings.limits.rate_limit_per_s, settings.limits.rate_limit_burst)
    app.state.auth_failures = auth_failures or InMemoryRateLimiter(settings.access.auth_failure_rate_per_s,
                                                                   settings.access.auth_failure_burst)
    readiness = checks if checks is not None else [("store", lambda: ctx.store.exists("_readyz"))]
    app.include_router(jobs.router)
    app.include_router(job_details_router)
    app.include_router(uploads.router)
    app.include_router(schedules.router)
    app.include_router(openai_files.router)
    app.include_router(openai_batches.router)
    app.include_router(embeddings.router)
    app.include_router(sink_routes.router)
    app.include_router(estimates.router)
    app.include_router(models.router)
    app.state.estimates = anyio.CapacityLimiter(settings.estimates.estimate_concurrency)
    app.state.lane = embeddings.LaneAccess(lane or InMemoryEmbeddingLane(),
                                           anyio.CapacityLimiter(settings.lane.embeddings_max_waiting), settings)
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.limits.max_request_bytes,
                       limits={"/v1/files": settings.limits.max_file_bytes + MULTIPART_OVERHEAD_BYTES})
    # The client address every limit keys on: X-Forwarded-For counts only from POOLQ_TRUSTED_PROXIES.
    app.add_middleware(TrustedProxyMiddleware, proxies=TrustedProxies.parse(settings.access.trusted_proxies))
    install_metrics(app, settings, ctx.metrics, gauges or gauges_for(ctx.status, ctx.leases), ctx.workers)
    install_unavailable_handlers(app)
    install_disconnect_handler(app)
    install_error_answers(app)  # OpenAI's error shape on OpenAI's routes, poolq's on the rest

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], responses={503: {"description": "a dependency is unreachable"}})
    def readyz() -> JSONResponse:
        """Redis and the object store answer (each probe within its client's deadline)."""
        results = {name: _probe(check) for name, check in readiness}
        if all(result == "ok" for result in results.values()):
            return JSONResponse({"status": "ok", **results})
        return JSONResponse({"status": "unavailable", **results}, status_code=503,
                            headers={"Retry-After": str(RETRY_AFTER_S)})

    return app


def _probe(check: Callable[[], object]) -> str:
    try:
        check()
    except Exception as exc:  # noqa: BLE001 - any failure means not ready; say which
        return f"error: {type(exc).__name__}"
    return "ok"
