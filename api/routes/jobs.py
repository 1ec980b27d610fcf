"""``/v1/jobs``: submit, poll, fetch results. Routes only translate HTTP <-> plain functions."""
from __future__ import annotations

import json

from fastapi import APIRouter, HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError

from jobs.context import JobContext
from jobs.job import JobSpec, JobStatus
from jobs.submit import JobRejected, submit_job

from ..schemas import JobResults

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


def _ctx(request: Request) -> JobContext:
    return request.app.state.ctx


def _job_or_404(ctx: JobContext, job_id: str) -> JobStatus:
    job = ctx.status.get(job_id)
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id!r} not found")
    return job


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=JobStatus)
def create_job(spec: JobSpec, request: Request, response: Response) -> JobStatus:
    try:
        job = submit_job(spec, _ctx(request))
    except JobRejected as exc:
        loc = ("body", *exc.field.split("."))
        raise RequestValidationError([{"loc": loc, "msg": str(exc), "type": "value_error"}]) from None
    response.headers["Location"] = str(request.url_for("get_job", job_id=job.id))
    return job


@router.get("/{job_id}", response_model=JobStatus)
def get_job(job_id: str, request: Request) -> JobStatus:
    return _job_or_404(_ctx(request), job_id)


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
        usage=manifest["usage"],
        parts=[{**part, "url": sign(part["key"])} for part in manifest["parts"]],
        errors={**manifest["errors"], "url": sign(manifest["errors"]["key"])},
        url_expires_in_s=expires,
    )
