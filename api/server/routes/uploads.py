"""``/v1/uploads``: a presigned PUT for a large input, then ``{"input": {"uri": ...}}`` in a job."""
from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, HTTPException, status
from pydantic import BaseModel, ConfigDict, Field, model_validator

from poolq.api.server.dependencies import Caller, Context
from poolq.api.server.guards.security import AUTH_RESPONSES
from poolq.api.server.guards.strict_json import StrictJsonRoute
from poolq.api.server.schemas import ErrorBody
from poolq.jobs import create_upload
from poolq.jobs.inputs.input_format import INPUT_SUFFIXES, suffix_of
from poolq.jobs.spec.dict_access import DictAccessDeprecated
from poolq.storage import UnsupportedOperation

# StrictJsonRoute: a body that is not UTF-8 JSON is a 422 naming where, not FastAPI's bare 400
router = APIRouter(prefix="/v1/uploads", tags=["uploads"], route_class=StrictJsonRoute, responses=AUTH_RESPONSES)

UploadFormat = Literal["jsonl", "jsonl.gz", "parquet"]


class UploadRequest(BaseModel):
    """What the file is, so its key keeps its ending: ``format``, or a ``filename`` whose ending says
    it (only the ending is used). Neither: JSONL. Readers still look at the bytes first (``PAR1``:
    Parquet, gzip: ``.jsonl.gz``)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field is a 422 naming it, as in every body

    format: UploadFormat | None = None
    filename: str | None = Field(None, min_length=1, max_length=1024, description="e.g. corpus.parquet")

    @model_validator(mode="after")
    def _known_ending(self) -> UploadRequest:
        if self.filename is None:
            return self
        found = suffix_of(self.filename)
        if found is None:
            raise ValueError(f"filename {self.filename[:200]!r} has none of the input endings "
                             f"{', '.join(INPUT_SUFFIXES)} (or give format: jsonl, jsonl.gz or parquet)")
        if self.format is not None and "." + self.format != found:
            raise ValueError(f"filename {self.filename[:200]!r} says {found}, format says {self.format}")
        return self

    @property
    def suffix(self) -> str:
        if self.format is not None:
            return "." + self.format
        return suffix_of(self.filename or "") or ".jsonl"


class Upload(DictAccessDeprecated, BaseModel):
    upload_id: str
    uri: str
    url: str
    method: str = "PUT"
    expires_in_s: int


@router.post("", status_code=status.HTTP_201_CREATED, response_model=Upload,
             responses={501: {"model": ErrorBody, "description": "the server's store cannot presign uploads"}})
def create(ctx: Context, principal: Caller, body: Annotated[UploadRequest | None, Body()] = None) -> Upload:
    """A fresh object in the caller's uploads area: PUT the file (JSONL, ``.jsonl.gz`` or Parquet;
    say which with ``format`` or ``filename``, so the key keeps its ending) to ``url``, then submit
    a job with ``input.uri`` = ``uri``. The URL expires after ``expires_in_s``."""
    try:
        ticket = create_upload(ctx, principal.tenant, (body or UploadRequest()).suffix)
    except UnsupportedOperation as exc:
        raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED, str(exc)) from None
    return Upload(upload_id=ticket.upload_id, uri=ticket.uri, url=ticket.url, expires_in_s=ticket.expires_in_s)
