"""The FastAPI application."""
from __future__ import annotations

from fastapi import FastAPI

from jobs.context import JobContext
from jobs.settings import Settings

from .routes import jobs, schedules


def create_app(settings: Settings | None = None, ctx: JobContext | None = None) -> FastAPI:
    """The API for ``settings`` (default: from POOLQ_* env). ``ctx`` overrides the job context."""
    settings = settings or Settings()
    if ctx is None:
        from .context import api_context

        ctx = api_context(settings)
    app = FastAPI(title="poolq", version="1", description="Async jobs for pooling models: embed corpora into Parquet.")
    app.state.ctx = ctx
    app.include_router(jobs.router)
    app.include_router(schedules.router)

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app
