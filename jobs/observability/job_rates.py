"""A job's pace as its status shows it: tokens/s, documents/s and the time left."""
from __future__ import annotations

from datetime import datetime, timezone

from poolq.jobs.model.job_status import JobRates, JobStatus


def job_rates(status: JobStatus, now: datetime | None = None) -> JobRates:
    """Rates over the job's running time so far (to ``finished_at`` once it finished)."""
    if status.started_at is None:
        return JobRates()
    end = status.finished_at or now or datetime.now(timezone.utc)
    elapsed = (end - status.started_at).total_seconds()
    documents = status.counts.completed + status.counts.failed + status.in_progress.documents
    tokens = status.usage.tokens + status.in_progress.tokens
    if elapsed <= 0 or documents == 0:
        return JobRates()
    documents_per_s = documents / elapsed
    eta = None
    if status.status.is_terminal:
        eta = 0.0
    elif status.counts.total is not None:
        eta = max(0.0, (status.counts.total - documents) / documents_per_s)
    return JobRates(tokens_per_s=tokens / elapsed, documents_per_s=documents_per_s, eta_s=eta)
