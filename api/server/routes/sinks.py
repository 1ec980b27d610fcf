"""``/v1/jobs/{id}/sinks``: retry a finished job's failed sink load (docs/sinks/)."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from pydantic import BaseModel

from poolq.api.server.dependencies import CallersJob
from poolq.api.server.guards.security import AUTH_RESPONSES
from poolq.api.server.guards.strict_json import StrictJsonRoute
from poolq.api.server.schemas import ErrorBody
from poolq.jobs.spec.dict_access import DictAccessDeprecated
from poolq.products import retry_sinks

router = APIRouter(prefix="/v1/jobs", tags=["sinks"], route_class=StrictJsonRoute, responses=AUTH_RESPONSES)


class SinkRetry(DictAccessDeprecated, BaseModel):
    job_id: str
    retried: list[str]  # the sinks whose load was queued again


@router.post("/{job_id}/sinks/retry", status_code=status.HTTP_202_ACCEPTED, response_model=SinkRetry,
             responses={404: {"model": ErrorBody, "description": "no such job (or another tenant's)"},
                        409: {"model": ErrorBody, "description": "no failed or pending sink load to retry"}})
def retry(job: CallersJob) -> SinkRetry:
    """Queue the job's failed (or stuck pending) sink loads again; its parts are loaded, not recomputed."""
    retried = retry_sinks(job)
    if not retried:
        raise HTTPException(status.HTTP_409_CONFLICT, f"job {job.id!r} has no failed sink load to retry "
                            "(not finished, no sink, or its load succeeded)")
    return SinkRetry(job_id=job.id, retried=retried)
