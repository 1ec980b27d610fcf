"""The OpenAI Files and Batch API's objects, as poolq serves them (the shapes of openai-python's
``FileObject`` and ``Batch``), defined once for the routes and the stored records."""
from __future__ import annotations

from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

FilePurpose = Literal["batch", "batch_output"]
BatchState = Literal["validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling",
                     "cancelled"]
# Endpoints a batch may name, each run as one poolq task (products/batches/request_lines.py).
BatchEndpoint = Literal["/v1/embeddings", "/v1/score", "/v1/rerank"]


class FileObject(BaseModel):
    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: FilePurpose
    status: Literal["uploaded", "processed", "error"] = "processed"
    expires_at: int | None = None
    status_details: str | None = None


class ExpiresAfter(BaseModel):
    """OpenAI's expiration policy of a file (``expires_after``; a batch's ``output_expires_after``):
    ``seconds`` after the file's own creation, 1 hour to 30 days."""

    model_config = ConfigDict(extra="forbid")
    anchor: Literal["created_at"]
    seconds: int = Field(ge=3600, le=30 * 86400)


class DeletedFile(BaseModel):
    id: str
    object: Literal["file"] = "file"
    deleted: bool = True


class BatchError(BaseModel):
    """One problem of a batch's input (``errors.data``): its code, message, line and field."""

    code: str
    message: str
    line: int | None = None
    param: str | None = None


class BatchErrors(BaseModel):
    object: Literal["list"] = "list"
    data: list[BatchError] = Field(default_factory=list)


class RequestCounts(BaseModel):
    total: int = 0
    completed: int = 0
    failed: int = 0


class BatchObject(BaseModel):
    id: str
    object: Literal["batch"] = "batch"
    endpoint: str
    model: str | None = None
    errors: BatchErrors | None = None
    input_file_id: str
    completion_window: str
    status: BatchState
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: int
    in_progress_at: int | None = None
    expires_at: int | None = None
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    request_counts: RequestCounts = Field(default_factory=RequestCounts)
    metadata: dict[str, str] | None = None
    poolq_job_id: str | None = Field(None, description="the poolq job running the batch (GET /v1/jobs/{id})")


Item = TypeVar("Item", bound=BaseModel)


class Page(BaseModel, Generic[Item]):
    """A cursor page, as OpenAI lists files and batches: pass ``after=last_id`` for the next."""

    object: Literal["list"] = "list"
    data: list[Item]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False
