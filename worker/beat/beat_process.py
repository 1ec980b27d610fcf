"""Running celery beat for poolq: the periodic reconciler and (stored) reindex schedules."""
from __future__ import annotations

from poolq.jobs.observability.log_format import use_celery_logging
from poolq.jobs.settings import Settings
from poolq.worker.celery_app import create_celery_app


def run_beat(settings: Settings, *, loglevel: str = "INFO") -> None:
    """Run beat with RedBeat until stopped. A second beat waits on RedBeat's lock."""
    use_celery_logging(settings.observability.log_format)
    app = create_celery_app(settings)
    app.start(argv=["beat", f"--loglevel={loglevel}", "--scheduler=poolq.worker.beat.beat_scheduler.PoolqBeatScheduler"])
