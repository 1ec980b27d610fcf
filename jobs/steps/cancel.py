"""Cancelling a job: a durable request in the ledger; running shards stop between batches."""
from __future__ import annotations

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_ids import JobNotFound
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobStatus
from poolq.jobs.status.current_status import current_status
from poolq.jobs.steps.dispatch import finalize_if_ready


class JobAlreadyFinished(RuntimeError):
    def __init__(self, status: JobStatus) -> None:
        super().__init__(f"job {status.id} already finished: {status.status.value}")
        self.status = status


def cancel_job(job: JobHandle) -> JobStatus:
    """Ask ``job.id`` to stop. Committed shards stay and are listed in its manifest."""
    status = current_status(job)
    if status is None:
        raise JobNotFound(job.id)
    if status.status.is_terminal:
        raise JobAlreadyFinished(status)
    job.ledger.request_cancel()
    job.ctx.fair.close(job.id)  # no more of its shards go out
    job.ctx.status.advance_to(job.id, JobState.CANCELLING)
    finalize_if_ready(job)  # nothing running: finish now; otherwise the last shard to stop does
    current = job.ctx.status.get(job.id)
    if current is None:  # pragma: no cover - created above
        raise JobNotFound(job.id)
    return current
