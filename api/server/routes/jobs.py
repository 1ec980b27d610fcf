"""``/v1/jobs``: submit, list, poll, cancel, fetch results. Routes only translate HTTP <-> plain
functions; every route is authenticated and sees only its caller's tenant (others' jobs: 404)."""
from __future__ import annotations

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError

from poolq.api.server.schemas import ErrorBody, JobList, JobResults, SpecValidation
from poolq.api.server.security import AUTH_RESPONSES, caller
from poolq.api.server.strict_json import StrictJsonRoute, strict_body
from poolq.jobs.context import JobContext
from poolq.jobs.model.job_spec import JobSpec
from poolq.jobs.model.job_status import JobStatus
from poolq.jobs.status.job_listing import list_jobs
from poolq.jobs.status.recovery import current_status
from poolq.jobs.steps.cancel import JobAlreadyFinished, JobNotFound, cancel_job
from poolq.jobs.steps.submit import IdempotencyConflict, JobRejected, TooManyActiveJobs, submit_job, validate_spec
from poolq.jobs.tenancy.api_keys import Principal

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=StrictJsonRoute, responses=AUTH_RESPONSES)
_NOT_FOUND = {404: {"model": ErrorBody, "description": "no such job (or another tenant's)"}}


def _ctx(request: Request) -> JobContext:
    return request.app.state.ctx


def _job_or_404(ctx: JobContext, job_id: str, principal: Principal) -> JobStatus:
    job = current_status(job_id, ctx)
    if job is None or job.tenant != principal.tenant:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id!r} not found")
    return job


def _invalid(loc: tuple, message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": loc, "msg": message, "type": "value_error"}])


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=JobStatus,
             responses={413: {"model": ErrorBody, "description": "body too large"},
                        429: {"model": ErrorBody, "description": "rate or active-job limit"}})
def create_job(
    spec: JobSpec,
    request: Request,
    response: Response,
    principal: Principal = Depends(caller),
    _strict: None = strict_body(JobSpec),
    idempotency_key: str | None = Header(None, min_length=1, max_length=255, description="same key, same job"),
) -> JobStatus:
    try:
        job = submit_job(spec, _ctx(request), idempotency_key=idempotency_key, tenant=principal.tenant)
    except JobRejected as exc:
        raise _invalid(("body", *exc.field.split(".")), str(exc)) from None
    except IdempotencyConflict as exc:
        raise _invalid(("header", "idempotency-key"), str(exc)) from None
    except TooManyActiveJobs as exc:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, str(exc), headers={"Retry-After": "30"}) from None
    response.headers["Location"] = str(request.url_for("get_job", job_id=job.id))
    return job


@router.post("/validate", response_model=SpecValidation)
def validate(spec: JobSpec, request: Request, principal: Principal = Depends(caller),
             _strict: None = strict_body(JobSpec)) -> SpecValidation:
    """The checks ``POST /v1/jobs`` makes on a body (model, task, options), submitting nothing:
    422 names what is wrong. The input is checked for its form only (not read, not its access)."""
    try:
        validate_spec(spec, _ctx(request))
    except JobRejected as exc:
        raise _invalid(("body", *exc.field.split(".")), str(exc)) from None
    return SpecValidation(valid=True)


@router.get("", response_model=JobList)
def list_all(
    request: Request,
    principal: Principal = Depends(caller),
    _strict: None = strict_body(JobSpec),
    limit: int = Query(50, ge=1, le=500),
    before: str | None = Query(None, pattern="^[0-9a-f]{32}$", description="a job id: list older jobs"),
) -> JobList:
    """The caller's jobs, newest first."""
    jobs = list_jobs(principal.tenant, _ctx(request), limit=limit, before=before)
    return JobList(jobs=jobs, next_before=jobs[-1].id if len(jobs) == limit else None)


@router.get("/{job_id}", response_model=JobStatus, responses=_NOT_FOUND)
def get_job(job_id: str, request: Request, principal: Principal = Depends(caller)) -> JobStatus:
    return _job_or_404(_ctx(request), job_id, principal)


@router.post("/{job_id}/cancel", status_code=status.HTTP_202_ACCEPTED, response_model=JobStatus,
             responses={**_NOT_FOUND, 409: {"model": ErrorBody, "description": "already finished"}})
def cancel(job_id: str, request: Request, principal: Principal = Depends(caller)) -> JobStatus:
    """Stop the job: running shards stop between batches; committed parts stay in its manifest."""
    ctx = _ctx(request)
    _job_or_404(ctx, job_id, principal)
    try:
        return cancel_job(job_id, ctx)
    except JobNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id!r} not found") from None
    except JobAlreadyFinished as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None


@router.get("/{job_id}/results", response_model=JobResults,
            responses={**_NOT_FOUND, 409: {"model": ErrorBody, "description": "not finished"}})
def get_results(job_id: str, request: Request, principal: Principal = Depends(caller)) -> JobResults:
    """The manifest with presigned GET URLs (short-lived), issued after the ownership check."""
    ctx = _ctx(request)
    job = _job_or_404(ctx, job_id, principal)
    if job.result is None:
        raise HTTPException(status.HTTP_409_CONFLICT, f"job {job_id!r} is {job.status.value}; results come when it finishes")
    layout = ctx.layout(job_id)
    manifest = ctx.ledger(job_id).manifest()
    if manifest is None:  # the status says finished, so the manifest was written; only a lost object gets here
        raise HTTPException(status.HTTP_409_CONFLICT, f"job {job_id!r} has no manifest yet; try again shortly")
    return JobResults.from_manifest(manifest, layout.manifest, ctx.store, ctx.settings.presign_expires_s)
