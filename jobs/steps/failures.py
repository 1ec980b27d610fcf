"""Which errors are worth retrying and what a step does when it gives up: declared once."""
from __future__ import annotations

import logging
from datetime import datetime, timezone

import botocore.exceptions
import kombu.exceptions
import redis.exceptions

from poolq.engine.loading.hub import HubUnavailable
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.engine_identity import EngineMismatch
from poolq.jobs.spec.job_state import JobState
from poolq.storage import ConditionalWritesUnsupported, InvalidURIError, ObjectNotFoundError, StorageError

log = logging.getLogger(__name__)

# Transient: the same call may succeed later (throttling, a restarting service, the network, a
# stalled service whose deadline passed). Redis', kombu's (the broker's) and botocore's errors are
# their own classes, not the built-in ones; the store wraps botocore's in StorageError, and its
# timeouts are listed too for a call that reaches botocore directly.
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (
    StorageError, ConnectionError, TimeoutError,
    redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, kombu.exceptions.OperationalError,
    botocore.exceptions.ConnectTimeoutError, botocore.exceptions.ReadTimeoutError,
    botocore.exceptions.EndpointConnectionError,
    HubUnavailable,  # the model hub (or its mirror) did not answer and the files are not cached yet
    EngineMismatch,  # this worker cannot make the job's rows: the retry leaves the shard to another (bounded)
)
# Permanent even though they are StorageErrors: retrying reads the same missing/invalid input.
FATAL_ERRORS: tuple[type[BaseException], ...] = (ObjectNotFoundError, InvalidURIError, ConditionalWritesUnsupported)

MAX_RETRIES = 5


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, RETRYABLE_ERRORS) and not isinstance(exc, FATAL_ERRORS)


def retry_delay_s(retries: int, jitter: float, base_s: float, max_s: float) -> float:
    """Exponential backoff with jitter (``jitter`` in [0, 1)): base * 2**retries, capped, then x0.5-1.5.

    ``base_s`` and ``max_s`` come from Settings (``task_retry_backoff_s``, ``task_retry_backoff_max_s``).
    """
    return min(max_s, base_s * 2**retries) * (0.5 + jitter)


def describe(exc: BaseException) -> str:
    """``Type: message``, then the notes a step added on the way out (where it was, PEP 678)."""
    notes = "".join(f" ({note})" for note in getattr(exc, "__notes__", ()))
    return f"{type(exc).__name__}: {exc}{notes}"


def fail_job(job: JobHandle, exc: BaseException) -> None:
    """Planning failed for good: record a failed manifest (the ledger's verdict), else at least the status."""
    from poolq.jobs.steps.finalizer import finalize_failed

    try:
        finalize_failed(job, describe(exc))
    except Exception as store_exc:  # noqa: BLE001 - the store itself is failing: say so on the status
        log.error("job %s: cannot record its failure in the store: %s", job.id, describe(store_exc))
        job.ctx.status.advance_to(job.id, JobState.FAILED, error=describe(exc), finished_at=datetime.now(timezone.utc))


def fail_shard(job: JobHandle, shard: int, exc: BaseException) -> None:
    """A shard failed for good: commit its records as errors so the rest of the job can finish."""
    from poolq.jobs.steps.shards.shard_runner import abandon_shard

    try:
        abandon_shard(job, shard, f"shard {shard} failed: {describe(exc)}")
    except Exception as store_exc:  # noqa: BLE001
        log.error("job %s shard %s: cannot record its failure: %s", job.id, shard, describe(store_exc))
        if not is_retryable(store_exc):
            # Its records cannot even be read back to be named (the input changed or went away since
            # planning): no retry reads them, so the job ends failed, its unrun records counted
            exc.add_note(f"shard {shard}")
            fail_job(job, exc)
            return
        job.ctx.status.advance_to(job.id, JobState.FAILED, error=describe(exc), finished_at=datetime.now(timezone.utc))
