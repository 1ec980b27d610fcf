"""``/v1/uploads``: a presigned PUT for a large input, then ``{"input": {"uri": ...}}`` in a job."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from pydantic import BaseModel

from poolq.api.server.dependencies import Caller, Context
from poolq.api.server.schemas import ErrorBody
from poolq.api.server.security import AUTH_RESPONSES
from poolq.jobs import create_upload
from poolq.storage import UnsupportedOperation

router = APIRouter(prefix="/v1/uploads", tags=["uploads"], responses=AUTH_RESPONSES)


class Upload(BaseModel):
    upload_id: str
    uri: str
    url: str
    method: str = "PUT"
    expires_in_s: int


@router.post("", status_code=status.HTTP_201_CREATED, response_model=Upload,
             responses={501: {"model": ErrorBody, "description": "the server's store cannot presign uploads"}})
def create(ctx: Context, principal: Caller) -> Upload:
    """A fresh object in the caller's uploads area: PUT the JSONL file to ``url``, then submit a
    job with ``input.uri`` = ``uri``. The URL expires after ``expires_in_s``."""
    try:
        ticket = create_upload(principal.tenant, ctx)
    except UnsupportedOperation as exc:
        raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED, str(exc)) from None
    return Upload(upload_id=ticket.upload_id, uri=ticket.uri, url=ticket.url, expires_in_s=ticket.expires_in_s)
