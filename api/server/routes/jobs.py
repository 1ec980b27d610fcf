"""``/v1/jobs``: submit, list, poll, cancel, fetch results. Routes only translate HTTP <-> plain
functions; every route is authenticated and sees only its caller's tenant (others' jobs: 404)."""
from __future__ import annotations

from contextlib import contextmanager
from functools import partial
from typing import Iterator

from fastapi import APIRouter, Header, HTTPException, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError

from poolq.api.server.dependencies import Caller, CallersJob, Context
from poolq.api.server.guards.estimate_pool import run_checks
from poolq.api.server.guards.security import AUTH_RESPONSES
from poolq.api.server.guards.strict_json import StrictJsonRoute, strict_body
from poolq.api.server.schemas import ErrorBody, JobList, JobResults, OpenApiResponses, SpecValidation
from poolq.jobs import (
    IdempotencyConflict,
    JobAlreadyFinished,
    JobHandle,
    JobRejected,
    JobSpec,
    JobStatus,
    TooManyActiveJobs,
    cancel_job,
    check_active_cap,
    check_job,
    current_status,
    list_jobs,
    submit_job,
)
from poolq.jobs.steps.submit import DailyTokensExhausted

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=StrictJsonRoute, responses=AUTH_RESPONSES)
_NOT_FOUND: OpenApiResponses = {404: {"model": ErrorBody, "description": "no such job (or another tenant's)"}}


def _status_or_404(job: JobHandle) -> JobStatus:
    status_now = current_status(job)
    if status_now is None:  # a submission under way has no spec yet
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job.id!r} not found")
    return status_now


def _invalid(loc: tuple, message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": loc, "msg": message, "type": "value_error"}])


@contextmanager
def _refusals() -> Iterator[None]:
    """A submission's refusals as HTTP answers, the same for ``POST /v1/jobs`` and ``/validate``."""
    try:
        yield
    except JobRejected as exc:
        raise _invalid(("body", *exc.field.split(".")), str(exc)) from None
    except IdempotencyConflict as exc:
        raise _invalid(("header", "idempotency-key"), str(exc)) from None
    except DailyTokensExhausted as exc:  # the tenant's tokens of the day (UTC): again at midnight
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, str(exc),
                            headers={"Retry-After": str(exc.retry_after_s)}) from None
    except TooManyActiveJobs as exc:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, str(exc), headers={"Retry-After": "30"}) from None


submission_refusals = _refusals  # the same answers for POST /v1/jobs/estimate (routes/estimates.py)


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=JobStatus,
             responses={413: {"model": ErrorBody, "description": "body too large"},
                        429: {"model": ErrorBody, "description": "rate, active-job or daily token limit"}})
async def create_job(
    ctx: Context,
    spec: JobSpec,
    request: Request,
    response: Response,
    principal: Caller,
    _strict: None = strict_body(JobSpec),
    idempotency_key: str | None = Header(None, min_length=1, max_length=255, description="same key, same job"),
) -> JobStatus:
    with _refusals():
        job = await run_checks(request, partial(submit_job, ctx, spec, idempotency_key=idempotency_key,
                                                tenant=principal.tenant), estimates=spec.limits is not None)
    response.headers["Location"] = str(request.url_for("get_job", job_id=job.id))
    return job


@router.post("/validate", response_model=SpecValidation,
             responses={429: {"model": ErrorBody, "description": "rate, active-job or daily token limit"}})
async def validate(ctx: Context, spec: JobSpec, request: Request, principal: Caller,
                   _strict: None = strict_body(JobSpec)) -> SpecValidation:
    """Exactly the checks ``POST /v1/jobs`` makes before it writes anything (model, task, options,
    sizes, access to the input URI, the caller's earlier run), then its active-job cap as it stands
    now; submits nothing. A refusal is the answer ``POST /v1/jobs`` would give: 422 naming the
    field, or 429. The input object itself is not read (planning reads it)."""

    def checks() -> None:
        check_job(ctx, spec, principal.tenant)
        check_active_cap(ctx, principal.tenant)

    with _refusals():
        await run_checks(request, checks, estimates=spec.limits is not None)
    return SpecValidation(valid=True)


@router.get("", response_model=JobList)
def list_all(
    ctx: Context,
    principal: Caller,
    _strict: None = strict_body(JobSpec),
    limit: int = Query(50, ge=1, le=500),
    before: str | None = Query(None, pattern="^[0-9a-f]{32}$", description="a job id: list older jobs"),
) -> JobList:
    """The caller's jobs, newest first."""
    jobs = list_jobs(ctx, principal.tenant, limit=limit, before=before)
    return JobList(jobs=jobs, next_before=jobs[-1].id if len(jobs) == limit else None)


@router.get("/{job_id}", response_model=JobStatus, responses=_NOT_FOUND)
def get_job(job: CallersJob) -> JobStatus:
    return _status_or_404(job)


@router.post("/{job_id}/cancel", status_code=status.HTTP_202_ACCEPTED, response_model=JobStatus,
             responses={**_NOT_FOUND, 409: {"model": ErrorBody, "description": "already finished"}})
def cancel(job: CallersJob) -> JobStatus:
    """Stop the job: running shards stop between batches; committed parts stay in its manifest."""
    _status_or_404(job)
    try:
        return cancel_job(job)
    except JobAlreadyFinished as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None


@router.get("/{job_id}/results", response_model=JobResults,
            responses={**_NOT_FOUND, 409: {"model": ErrorBody, "description": "not finished"}})
def get_results(job: CallersJob) -> JobResults:
    """The manifest with presigned GET URLs (short-lived), issued after the ownership check."""
    status_now = _status_or_404(job)
    if status_now.result is None:
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"job {job.id!r} is {status_now.status.value}; results come when it finishes")
    manifest = job.ledger.manifest()
    if manifest is None:  # the status says finished, so the manifest was written; only a lost object gets here
        raise HTTPException(status.HTTP_409_CONFLICT, f"job {job.id!r} has no manifest yet; try again shortly")
    return JobResults.from_manifest(manifest, job.layout.manifest, job.ctx.store, job.ctx.settings.storage.presign_expires_s)
