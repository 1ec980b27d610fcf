"""Which errors are worth retrying and which fail the job: declared once, used by every task."""
from __future__ import annotations

from datetime import datetime, timezone

from storage import InvalidURIError, ObjectNotFoundError, StorageError

from .context import JobContext
from .job import JobState

# Transient: the same call may succeed later (throttling, a restarting service, the network).
RETRYABLE_ERRORS: tuple[type[BaseException], ...] = (StorageError, ConnectionError, TimeoutError)
# Permanent even though they are StorageErrors: retrying reads the same missing/invalid input.
FATAL_ERRORS: tuple[type[BaseException], ...] = (ObjectNotFoundError, InvalidURIError)

MAX_RETRIES = 5
RETRY_BACKOFF_MAX_S = 60


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, RETRYABLE_ERRORS) and not isinstance(exc, FATAL_ERRORS)


def fail_job(job_id: str, exc: BaseException, ctx: JobContext) -> None:
    """Mark the job failed with a message a user can act on."""
    ctx.status.update(
        job_id,
        status=JobState.FAILED,
        error=f"{type(exc).__name__}: {exc}",
        finished_at=datetime.now(timezone.utc),
    )
