"""``/v1/batches``: OpenAI's Batch API; a batch is a poolq job underneath (its id is the
batch's ``poolq_job_id``). Another tenant's batches answer 404."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from poolq.api.server.dependencies import Caller, Context
from poolq.api.server.guards.strict_json import StrictJsonRoute, strict_body
from poolq.api.server.openai_errors import OPENAI_RESPONSES
from poolq.api.server.schemas import OpenAIErrorBody, OpenApiResponses
from poolq.products import (
    BatchAlreadyEnded,
    BatchNotFound,
    BatchObject,
    BatchRejected,
    ExpiresAfter,
    Page,
    cancel_batch,
    create_batch,
    get_batch,
    list_batches,
)

router = APIRouter(prefix="/v1/batches", tags=["openai"], route_class=StrictJsonRoute, responses=OPENAI_RESPONSES)
_NOT_FOUND: OpenApiResponses = {404: {"model": OpenAIErrorBody, "description": "no such batch (or another tenant's)"}}
MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=64)]
MetadataValue = Annotated[str, StringConstraints(max_length=512)]


class CreateBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input_file_id: str = Field(max_length=64)
    endpoint: str = Field(max_length=64, description="/v1/embeddings, /v1/score or /v1/rerank")
    completion_window: str = Field("24h", max_length=16, description="24h; poolq also takes e.g. 90m, 600s")
    metadata: dict[MetadataKey, MetadataValue] | None = Field(None, max_length=16)
    output_expires_after: ExpiresAfter | None = Field(
        None, description="the output and error files expire this long after they are written (default: kept)")


def _not_found(batch_id: str) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, f"batch {batch_id!r} not found")


@router.post("", response_model=BatchObject)
def create(ctx: Context, body: CreateBatch, principal: Caller,
           _strict: None = strict_body(CreateBatch)) -> BatchObject:
    try:
        expiry = body.output_expires_after.seconds if body.output_expires_after else None
        return create_batch(ctx, principal.tenant, body.input_file_id, body.endpoint, body.completion_window, body.metadata,
                            output_expires_after_s=expiry)
    except BatchRejected as exc:
        raise RequestValidationError([{"loc": ("body", exc.field), "msg": str(exc), "type": exc.code}]) from None


@router.get("", response_model=Page[BatchObject])
def list_all(ctx: Context, principal: Caller, after: str | None = Query(None, max_length=64),
             limit: int = Query(20, ge=1, le=100)) -> Page[BatchObject]:
    return list_batches(ctx, principal.tenant, after=after, limit=limit)


@router.get("/{batch_id}", response_model=BatchObject, responses=_NOT_FOUND)
def get(ctx: Context, batch_id: str, principal: Caller) -> BatchObject:
    try:
        return get_batch(ctx, principal.tenant, batch_id)
    except BatchNotFound:
        raise _not_found(batch_id) from None


@router.post("/{batch_id}/cancel", response_model=BatchObject,
             responses={**_NOT_FOUND, 409: {"model": OpenAIErrorBody, "description": "the batch has ended"}})
def cancel(ctx: Context, batch_id: str, principal: Caller) -> BatchObject:
    try:
        return cancel_batch(ctx, principal.tenant, batch_id)
    except BatchNotFound:
        raise _not_found(batch_id) from None
    except BatchAlreadyEnded as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
