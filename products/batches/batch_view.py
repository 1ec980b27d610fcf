"""A batch's OpenAI status, derived from its records and its job's status (nothing else is kept).

| records                       | job                  | status       |
|-------------------------------|----------------------|--------------|
| result.json                   | -                    | its status   |
| cancel.json                   | any, or none yet     | cancelling   |
| prepared.json                 | queued / running     | in_progress  |
| prepared.json                 | finished, or expired | finalizing   |
| batch.json only               | -                    | validating   |

While the job runs, ``completed`` counts requests of single records exactly and is otherwise
in proportion to records done; once the batch ends, its counts are the files' own.
"""
from __future__ import annotations

from poolq.jobs.spec.job_status import JobStatus
from poolq.products.batches.batch_records import BatchOutcome, BatchRequest, CancelRequest, PreparedInput
from poolq.products.batches.openai_objects import BatchErrors, BatchObject, RequestCounts

_FINAL_TIMESTAMP = {"completed": "completed_at", "failed": "failed_at", "expired": "expired_at",
                    "cancelled": "cancelled_at"}


def batch_view(request: BatchRequest, prepared: PreparedInput | None, cancel: CancelRequest | None,
               outcome: BatchOutcome | None, job: JobStatus | None, now: float) -> BatchObject:
    view = BatchObject(id=request.id, endpoint=request.endpoint, input_file_id=request.input_file_id,
                       completion_window=request.completion_window, status="validating", created_at=request.created_at,
                       expires_at=request.expires_at, metadata=request.metadata)
    if prepared is not None:
        view.model, view.poolq_job_id = prepared.model, prepared.job_id
        view.in_progress_at = prepared.prepared_at if prepared.job_id else None
        view.request_counts = _running_counts(prepared, job)
        if prepared.errors:
            view.errors = BatchErrors(data=list(prepared.errors))
    if cancel is not None:
        view.cancelling_at = cancel.cancelling_at
    if outcome is not None:
        return _ended(view, outcome)
    if cancel is not None:
        view.status = "cancelling"
    elif prepared is not None:
        job_done = job is not None and job.status.is_terminal
        view.status = "finalizing" if job_done or now >= request.expires_at else "in_progress"
        if view.status == "finalizing":
            finished = job.finished_at.timestamp() if job_done and job and job.finished_at else request.expires_at
            view.finalizing_at = int(finished)
    return view


def _running_counts(prepared: PreparedInput, job: JobStatus | None) -> RequestCounts:
    counts = RequestCounts(total=prepared.total, failed=prepared.invalid)
    if job is None or not prepared.records:
        return counts
    valid = prepared.total - prepared.invalid
    counts.completed = job.counts.completed * valid // prepared.records
    counts.failed += job.counts.failed * valid // prepared.records
    return counts


def _ended(view: BatchObject, outcome: BatchOutcome) -> BatchObject:
    view.status = outcome.status
    view.request_counts = outcome.counts
    view.output_file_id, view.error_file_id = outcome.output_file_id, outcome.error_file_id
    view.finalizing_at = outcome.finalizing_at
    setattr(view, _FINAL_TIMESTAMP[outcome.status], outcome.finished_at)
    if outcome.errors:
        view.errors = BatchErrors(data=list(outcome.errors))
    return view
