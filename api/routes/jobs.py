"""``/v1/jobs``: submit, poll, fetch results. Routes only translate HTTP <-> plain functions."""
from __future__ import annotations

import json

from fastapi import APIRouter, Header, HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError

from jobs.cancel import JobAlreadyFinished, JobNotFound, cancel_job
from jobs.context import JobContext
from jobs.job import JobSpec, JobStatus
from jobs.recovery import recover_status
from jobs.submit import IdempotencyConflict, JobRejected, submit_job

from ..schemas import JobResults

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


def _ctx(request: Request) -> JobContext:
    return request.app.state.ctx


def _job_or_404(ctx: JobContext, job_id: str) -> JobStatus:
    job = ctx.status.get(job_id) or recover_status(job_id, ctx)  # Redis may have lost it; the ledger has not
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id!r} not found")
    return job


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=JobStatus)
def create_job(
    spec: JobSpec,
    request: Request,
    response: Response,
    idempotency_key: str | None = Header(None, min_length=1, max_length=255, description="same key, same job"),
) -> JobStatus:
    try:
        job = submit_job(spec, _ctx(request), idempotency_key=idempotency_key)
    except JobRejected as exc:
        loc = ("body", *exc.field.split("."))
        raise RequestValidationError([{"loc": loc, "msg": str(exc), "type": "value_error"}]) from None
    except IdempotencyConflict as exc:
        loc = ("header", "idempotency-key")
        raise RequestValidationError([{"loc": loc, "msg": str(exc), "type": "value_error"}]) from None
    response.headers["Location"] = str(request.url_for("get_job", job_id=job.id))
    return job


@router.get("/{job_id}", response_model=JobStatus)
def get_job(job_id: str, request: Request) -> JobStatus:
    return _job_or_404(_ctx(request), job_id)


@router.post("/{job_id}/cancel", status_code=status.HTTP_202_ACCEPTED, response_model=JobStatus,
             responses={404: {"description": "no such job"}, 409: {"description": "already finished"}})
def cancel(job_id: str, request: Request) -> JobStatus:
    """Stop the job: running shards stop between batches; committed parts stay in its manifest."""
    try:
        return cancel_job(job_id, _ctx(request))
    except JobNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id!r} not found") from None
    except JobAlreadyFinished as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None


@router.get("/{job_id}/results", response_model=JobResults, responses={409: {"description": "not finished"}})
def get_results(job_id: str, request: Request) -> JobResults:
    ctx = _ctx(request)
    job = _job_or_404(ctx, job_id)
    if job.result is None:
        raise HTTPException(status.HTTP_409_CONFLICT, f"job {job_id!r} is {job.status.value}; results come when it finishes")
    layout = ctx.layout(job_id)
    manifest = json.loads(ctx.store.get(layout.manifest))
    expires = ctx.settings.presign_expires_s
    sign = lambda key: ctx.store.presigned_get_url(key, expires)  # noqa: E731
    return JobResults(
        job_id=job_id,
        status=manifest["status"],
        manifest_key=layout.manifest,
        manifest_uri=ctx.store.uri(layout.manifest),
        dimensions=manifest["dimensions"],
        columns=manifest["columns"],
        counts=manifest["counts"],
        error=manifest.get("error"),
        usage=manifest["usage"],
        parts=[{**part, "url": sign(part["key"])} for part in manifest["parts"]],
        errors={**manifest["errors"], "url": sign(manifest["errors"]["key"])},
        url_expires_in_s=expires,
    )
