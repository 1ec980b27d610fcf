"""``/v1/files``: OpenAI's Files API for batch inputs and outputs (the official ``openai``
package works against it unchanged). Another tenant's files answer 404."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Literal

from fastapi import APIRouter, File, Form, HTTPException, Query, UploadFile, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from poolq.api.server.dependencies import Caller, Context
from poolq.api.server.openai_errors import OPENAI_RESPONSES
from poolq.api.server.schemas import OpenAIErrorBody, OpenApiResponses
from poolq.products import (
    DeletedFile,
    ExpiresAfter,
    FileNotFound,
    FileObject,
    FileTooLarge,
    Page,
    create_file,
    delete_file,
    get_file,
    list_files,
    open_file_content,
)

router = APIRouter(prefix="/v1/files", tags=["openai"], responses=OPENAI_RESPONSES)
_NOT_FOUND: OpenApiResponses = {404: {"model": OpenAIErrorBody, "description": "no such file (or another tenant's)"}}
_STREAM_BYTES = 1 << 20


@contextmanager
def _file_or_404(file_id: str) -> Iterator[None]:
    """A missing file (or another tenant's) answers 404, the same either way."""
    try:
        yield
    except FileNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"file {file_id!r} not found") from None


@router.post("", response_model=FileObject,
             responses={400: {"model": OpenAIErrorBody, "description": "the body is not a multipart form, or a field "
                              "is not valid: `param` names it"},
                        413: {"model": OpenAIErrorBody, "description": "over POOLQ_MAX_FILE_BYTES"}})
def upload(ctx: Context, principal: Caller, file: UploadFile = File(...), purpose: Literal["batch"] = Form(...),
           expires_anchor: str | None = Form(None, alias="expires_after[anchor]", max_length=32),
           expires_seconds: int | None = Form(None, alias="expires_after[seconds]")) -> FileObject:
    """A batch input file (JSONL, one request per line), streamed into the store; with
    ``expires_after`` (OpenAI's form fields) it is deleted that many seconds after its upload."""
    expiry = _expires_after(expires_anchor, expires_seconds)
    try:
        return create_file(ctx, principal.tenant, file.filename or "upload.jsonl", purpose, file.file,
                           ctx.settings.limits.max_file_bytes, expires_after_s=expiry.seconds if expiry else None)
    except FileTooLarge as exc:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, str(exc)) from None


def _expires_after(anchor: str | None, seconds: int | None) -> ExpiresAfter | None:
    """OpenAI's ``expires_after[anchor]`` and ``expires_after[seconds]`` form fields, checked by
    the one model that also checks a batch's ``output_expires_after``; a 400 naming the field."""
    if anchor is None and seconds is None:
        return None
    try:
        return ExpiresAfter.model_validate({"anchor": anchor, "seconds": seconds})
    except ValidationError as exc:
        raise RequestValidationError([{**error, "loc": ("body", f"expires_after[{error['loc'][0]}]")}
                                      for error in exc.errors(include_url=False, include_context=False)]) from None


@router.get("", response_model=Page[FileObject])
def list_all(ctx: Context, principal: Caller, after: str | None = Query(None, max_length=64),
             limit: int = Query(10_000, ge=1, le=10_000), order: Literal["asc", "desc"] = "desc",
             purpose: str | None = Query(None, max_length=64)) -> Page[FileObject]:
    return list_files(ctx, principal.tenant, after=after, limit=limit, order=order, purpose=purpose)


@router.get("/{file_id}", response_model=FileObject, responses=_NOT_FOUND)
def get(ctx: Context, file_id: str, principal: Caller) -> FileObject:
    with _file_or_404(file_id):
        return get_file(ctx, principal.tenant, file_id)


@router.get("/{file_id}/content", response_class=StreamingResponse, responses=_NOT_FOUND)
def content(ctx: Context, file_id: str, principal: Caller) -> StreamingResponse:
    with _file_or_404(file_id):
        stream = open_file_content(ctx, principal.tenant, file_id)

    def chunks() -> Iterator[bytes]:
        with stream:
            yield from iter(lambda: stream.read(_STREAM_BYTES), b"")

    return StreamingResponse(chunks(), media_type="application/jsonl")


@router.delete("/{file_id}", response_model=DeletedFile, responses=_NOT_FOUND)
def delete(ctx: Context, file_id: str, principal: Caller) -> DeletedFile:
    with _file_or_404(file_id):
        return delete_file(ctx, principal.tenant, file_id)
