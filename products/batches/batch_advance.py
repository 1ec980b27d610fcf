"""A batch's next step, whatever happened before: read its input and submit its job; cancel the
job once the batch is cancelled or past its window; write its files once the job has ended.

Idempotent and safe to run concurrently (one runs at a time under a lease; records are written
once each): the batch task, the reconciler's pass and a status poll may all call it."""
from __future__ import annotations

import logging
import time
import uuid

from poolq.jobs.context import JobContext
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobStatus
from poolq.jobs.status.current_status import current_status
from poolq.jobs.steps.cancel import JobAlreadyFinished, cancel_job
from poolq.jobs.steps.failures import describe, is_retryable
from poolq.jobs.steps.shards.budget import stopped_by_budget
from poolq.products.batches.batch_files import FileNotFound
from poolq.products.batches.batch_layout import BatchLayout
from poolq.products.batches.batch_output import write_batch_files
from poolq.products.batches.batch_prepare import prepare_batch
from poolq.products.batches.batch_records import (
    STEP_FAILURES,
    BatchOutcome,
    BatchRecords,
    BatchRequest,
    FinalState,
    PreparedInput,
    StepFailure,
)
from poolq.products.batches.openai_objects import BatchError, RequestCounts

log = logging.getLogger(__name__)

BATCH_UNIT = "batch"  # the lease's unit: one step of a batch at a time
EXPIRED = ("batch_expired", "This request could not be executed before the completion window expired.")
CANCELLED = ("batch_cancelled", "This request was not executed: the batch was cancelled.")
BUDGET_STOPPED = ("token_limit_exceeded", "This request was not executed: the batch's job reached its token budget.")
# A step that fails for good this often (a bug, an input no step can get past; not an outage) ends the batch.
MAX_STEP_FAILURES = 3


def advance_batch(ctx: JobContext, tenant: str, batch_id: str, now: float | None = None) -> BatchOutcome | None:
    """Take the batch one step on; its outcome once it has ended, else None."""
    lease = ctx.leases.acquire(batch_id, BATCH_UNIT, float(ctx.settings.tasks.task_time_limit_s))
    if lease is None:
        return None  # another call is at it
    try:
        return _advance(ctx, BatchLayout(ctx.service_layout, tenant), batch_id, time.time() if now is None else now)
    finally:
        ctx.leases.release(lease)


def _advance(ctx: JobContext, layout: BatchLayout, batch_id: str, now: float) -> BatchOutcome | None:
    records = BatchRecords(ctx, layout, batch_id)
    request = records.request()
    outcome = records.outcome()
    if request is None or outcome is not None:
        ctx.store.delete(layout.active(batch_id))
        return outcome
    cancelled, expired = records.cancel() is not None, now >= request.expires_at
    prepared = records.prepared()
    if prepared is None:
        if cancelled or expired:
            return _finish(ctx, records, layout, request, _unprepared(request), "cancelled" if cancelled else "expired", now)
        try:
            prepared = prepare_batch(ctx, layout.tenant, batch_id)
        except FileNotFound:
            failure = BatchError(code="input_file_missing", message=f"input file {request.input_file_id} was deleted "
                                 "before the batch read it", param="input_file_id")
            return _finish(ctx, records, layout, request, _unprepared(request), "failed", now, [failure])
        if prepared is None:
            return None  # waiting for a job slot
    if prepared.job_id is None:
        return _finish(ctx, records, layout, request, prepared, "failed", now, list(prepared.errors))
    batch_job = JobHandle.of_tenant(ctx, prepared.job_id, layout.tenant)
    job = current_status(batch_job)
    if job is None:
        return None  # the job's status is being rebuilt: next pass
    if not job.status.is_terminal:
        if cancelled or expired:
            _stop(batch_job)
        return None
    # The first stop asked is the one the job records: the batch's cancel or expiry, or the job's token budget
    budget = job.status is JobState.CANCELLED and stopped_by_budget(batch_job)
    return _finish_ran(ctx, records, layout, request, prepared, job, cancelled and not budget, budget, now)


def give_up_batch(ctx: JobContext, tenant: str, batch_id: str, exc: Exception,
                  now: float | None = None) -> BatchOutcome | None:
    """The batch's step failed for good. An outage (a retryable error) leaves it to the next pass;
    any other failure is recorded, and the ``MAX_STEP_FAILURES``-th ends the batch ``failed`` with
    the error and without files (writing them may be what fails), its job stopped."""
    if is_retryable(exc):
        return None
    layout, now = BatchLayout(ctx.service_layout, tenant), time.time() if now is None else now
    records = BatchRecords(ctx, layout, batch_id)
    records.write_once(f"{STEP_FAILURES}{uuid.uuid4().hex}.json", StepFailure(error=describe(exc), at=int(now)))
    failures = sum(1 for _ in ctx.store.list(records.key(STEP_FAILURES)))
    request = records.request()
    if failures < MAX_STEP_FAILURES or request is None or records.outcome() is not None:
        return None
    log.error("batch %s: its step failed %d times, the batch fails: %s", batch_id, failures, describe(exc))
    prepared = records.prepared()
    if prepared is not None and prepared.job_id is not None:
        _stop(JobHandle.of_tenant(ctx, prepared.job_id, tenant))
    failure = BatchError(code="internal_error", message=f"the batch could not go on: its step failed {failures} "
                                                        f"times, the last with {describe(exc)}")
    return _finish(ctx, records, layout, request, _unprepared(request), "failed", now,
                   [*(prepared.errors if prepared else []), failure])


def _finish_ran(ctx: JobContext, records: BatchRecords, layout: BatchLayout, request: BatchRequest, prepared: PreparedInput,
                job: JobStatus, cancelled: bool, budget: bool, now: float) -> BatchOutcome | None:
    """The job has ended: the batch's status follows from how, and from why it was stopped (the
    batch's cancel, its window, or the job's token budget: ``budget``)."""
    if job.status is JobState.FAILED:
        failure = BatchError(code="batch_failed", message=f"the batch's job {job.id} failed: {job.error}")
        return _finish(ctx, records, layout, request, prepared, "failed", now, [*prepared.errors, failure],
                       unrun=("batch_failed", f"not executed: the batch's job failed ({job.error})"))
    if budget:  # what ran is answered; the rest is unrun, as in an expired batch, but the batch failed
        failure = BatchError(code="token_limit_exceeded",
                             message=f"the batch's job {job.id} reached its token budget: {job.error}")
        return _finish(ctx, records, layout, request, prepared, "failed", now, [*prepared.errors, failure],
                       unrun=BUDGET_STOPPED, finalizing_at=job.finished_at.timestamp() if job.finished_at else now)
    stopped = job.status is JobState.CANCELLED
    status: FinalState = "cancelled" if cancelled else "expired" if stopped else "completed"
    unrun = (CANCELLED if cancelled else EXPIRED) if stopped else None
    return _finish(ctx, records, layout, request, prepared, status, now, list(prepared.errors), unrun=unrun,
                   finalizing_at=job.finished_at.timestamp() if job.finished_at else now)


def _stop(job: JobHandle) -> None:
    try:
        cancel_job(job)
    except JobAlreadyFinished:
        pass


def _unprepared(request: BatchRequest) -> PreparedInput:
    return PreparedInput(job_id=None, model=None, total=0, invalid=0, records=0, prepared_at=request.created_at)


def _finish(ctx: JobContext, records: BatchRecords, layout: BatchLayout, request: BatchRequest, prepared: PreparedInput,
            status: FinalState, now: float, errors: list[BatchError] | None = None,
            unrun: tuple[str, str] | None = None, finalizing_at: float | None = None) -> BatchOutcome | None:
    if prepared.total:
        files = write_batch_files(ctx, layout.tenant, request, prepared, unrun)
        output_id, error_id, counts = files.output_file_id, files.error_file_id, files.counts
    else:
        output_id, error_id, counts = None, None, RequestCounts()
    outcome = BatchOutcome(status=status, counts=counts, output_file_id=output_id, error_file_id=error_id,
                           finalizing_at=int(finalizing_at or now), finished_at=int(now), errors=errors or [])
    records.write_once("result.json", outcome)
    ctx.store.delete(layout.active(request.id))
    log.info("batch %s %s: %s", request.id, status, counts)
    return records.outcome()
