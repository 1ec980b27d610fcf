"""Jobs waiting in line on a fleet of one measured worker: what the tests of a job's place and ETA build on."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.status_store import CHARACTERS_FIELD
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobStatus
from poolq.worker.local_runner import local_context

START = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
MODEL = "m"


def fleet_of_one(folder: Path) -> JobContext:
    """An in-process context whose fleet is worker w1: 1,000 tokens/s of ``MODEL``, no characters counted."""
    ctx = local_context(folder, Settings())
    ctx.workers.heartbeat("w1", 60.0)
    ctx.throughput.record("w1", MODEL, "float32", tokens=1000, seconds=1.0)
    return ctx


def job_in_line(ctx: JobContext, n: int, tenant: str, characters: int | None = 4000) -> str:
    """Job number ``n`` (submitted n s after START) of ``tenant``; planned with ``characters`` (4 a token
    before any is measured: 4,000 -> 1,000 tokens) unless None (still queued)."""
    job_id = f"{n:032x}"
    ctx.status.create(JobStatus(id=job_id, tenant=tenant, status=JobState.QUEUED, model=MODEL, task="embed",
                                created_at=START + timedelta(seconds=n)))
    ctx.status.add_active(tenant, job_id)
    if characters is not None:
        planned(ctx, job_id, characters)
    return job_id


def planned(ctx: JobContext, job_id: str, characters: int) -> None:
    """The job's planning finished: it runs, and its work is ``characters``."""
    ctx.status.transition(job_id, JobState.RUNNING, started_at=START)
    ctx.status.update(job_id, **{CHARACTERS_FIELD: characters})
