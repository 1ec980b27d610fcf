"""A job's status as the API answers it (``JobStatus``), from only the fields a test cares about."""
from __future__ import annotations

from poolq.jobs.spec.job_status import JobStatus

CREATED_AT = "2026-01-01T00:00:00Z"


def job_status(fields: dict) -> JobStatus:
    """``fields`` (the JSON an API answer would hold) as the client reads it; a model, a task and a
    creation time where ``fields`` names none (the CLI prints them, the tests do not care)."""
    return JobStatus.model_validate({"model": "m", "task": "embed", "created_at": CREATED_AT, **fields})
