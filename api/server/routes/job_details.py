"""A job's details that its status leaves out, read-only, for the dashboard's job page (and any client):
the options it was submitted with, and a few failed records per error code."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, Query, status

from poolq.api.server.dependencies import CallersJob
from poolq.api.server.guards.security import AUTH_RESPONSES
from poolq.api.server.schemas import ErrorBody, OpenApiResponses
from poolq.jobs import JobSpec
from poolq.jobs.status.error_samples import ErrorSamples, error_samples

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=AUTH_RESPONSES)
_NOT_FOUND: OpenApiResponses = {404: {"model": ErrorBody, "description": "no such job (or another tenant's)"}}


@router.get("/{job_id}/spec", response_model=JobSpec, response_model_exclude_none=True, responses=_NOT_FOUND)
def get_spec(job: CallersJob) -> JobSpec:
    """The job's options as submitted (its spec, inline documents included; null options left out)."""
    return job.spec


@router.get("/{job_id}/error-samples", response_model=ErrorSamples,
            responses={**_NOT_FOUND, 409: {"model": ErrorBody, "description": "not finished"}})
def get_error_samples(job: CallersJob, per_code: int = Query(3, ge=1, le=20)) -> ErrorSamples:
    """Up to ``per_code`` failed records of each error code, from the head of the job's error file."""
    samples = error_samples(job, per_code)
    if samples is None:
        raise HTTPException(status.HTTP_409_CONFLICT, f"job {job.id!r} has not finished; its error file comes when it does")
    return samples
