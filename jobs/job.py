"""The job model: what a client submits (JobSpec) and what it polls (JobStatus)."""
from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engine import DEFAULT_MODEL, ChunkBoundary, LongDocumentMode, LongDocumentPolicy, TruncationSide


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


CharSpan = tuple[int, int]


class InlineDocument(_Strict):
    id: str = Field(min_length=1, max_length=512)
    text: str
    chunk_spans: list[CharSpan] | None = Field(None, description="character spans, for chunk_by='spans'")


class InlineInput(_Strict):
    """Small inputs sent in the request body."""

    documents: list[InlineDocument] = Field(min_length=1)


class UriInput(_Strict):
    """A JSONL object in the store (one JSON object per line), or a prefix ending in ``/``: every
    ``*.jsonl`` object under it, read one after another in key order."""

    uri: str = Field(description="s3://bucket/key.jsonl, or s3://bucket/prefix/ for every *.jsonl under it")
    id_field: str = "id"
    text_field: str = "text"
    spans_field: str = Field("chunk_spans", description="field holding [[start, end], ...] for chunk_by='spans'")


class OutputOptions(_Strict):
    format: Literal["parquet"] = "parquet"


class LongDocuments(_Strict):
    """What to do with documents longer than the model's window (see engine.LongDocumentPolicy)."""

    mode: LongDocumentMode = LongDocumentMode.ERROR
    side: TruncationSide = TruncationSide.END
    window_tokens: int | None = Field(None, ge=1, description="raise the window up to the model's position limit")
    max_embed_len: int | None = Field(None, ge=1, description="chunked: longest document accepted, in tokens")
    window_specials: bool | None = Field(None, description="chunked: re-add special tokens to every window")
    chunk_by: ChunkBoundary = ChunkBoundary.TOKENS
    chunk_tokens: int = Field(256, ge=1)
    chunk_sentences: int = Field(3, ge=1)
    overlap_tokens: int | None = Field(None, ge=0, description="late_chunks: macro-window overlap (default window/4)")
    allow_any_pooling: bool = Field(False, description="late_chunks with a model that is not MEAN-pooled")

    def policy(self) -> LongDocumentPolicy:
        return LongDocumentPolicy(**self.model_dump())


class JobSpec(_Strict):
    """The body of ``POST /v1/jobs``."""

    model: str = DEFAULT_MODEL
    task: Literal["embed"] = "embed"
    input: InlineInput | UriInput
    output: OutputOptions = Field(default_factory=OutputOptions)
    long_documents: LongDocuments = Field(default_factory=LongDocuments)
    incremental_from: str | None = Field(
        None, pattern=r"^[0-9a-f]{32}$",
        description="an earlier job: documents whose id and content hash match its output (same model and "
        "options) are carried over instead of embedded again",
    )


class JobState(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PARTIALLY_SUCCEEDED = "partially_succeeded"
    FAILED = "failed"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return not TRANSITIONS[self]

    def can_become(self, target: "JobState") -> bool:
        return target in TRANSITIONS[self]


# Every allowed move, declared once. Terminal states have none: they never change.
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.RUNNING, JobState.CANCELLING, JobState.FAILED}),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.PARTIALLY_SUCCEEDED, JobState.FAILED, JobState.CANCELLING}
    ),
    JobState.CANCELLING: frozenset({JobState.CANCELLED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.PARTIALLY_SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


class JobCounts(BaseModel):
    total: int | None = None  # known once the input has been read
    completed: int = 0
    failed: int = 0


class JobUsage(BaseModel):
    tokens: int = 0


class JobResult(BaseModel):
    manifest_uri: str


class JobStatus(BaseModel):
    """What ``GET /v1/jobs/{id}`` returns."""

    id: str
    status: JobState
    model: str
    task: str
    counts: JobCounts = Field(default_factory=JobCounts)
    usage: JobUsage = Field(default_factory=JobUsage)
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    result: JobResult | None = None
    error: str | None = None
