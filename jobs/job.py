"""The job model: what a client submits (JobSpec) and what it polls (JobStatus)."""
from __future__ import annotations

import re
import secrets
import threading
import time
from datetime import datetime
from enum import Enum
from typing import Annotated, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    JsonValue,
    PlainValidator,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass

from poolq.engine import DEFAULT_MODEL, LongDocumentPolicy
from poolq.jobs.inputs.records import ID_PATTERN, MAX_ID_LENGTH
from poolq.storage import EmbeddingCodec, codec_for


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


CharSpan = tuple[int, int]


class InlineDocument(_Strict):
    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)  # see jobs/inputs/records.py
    text: str
    chunk_spans: list[CharSpan] | None = Field(None, description="character spans, for chunk_by='spans'")
    query: str | None = Field(None, description="score jobs: the pair's first text (``text`` is its second)")
    query_id: str | None = Field(None, min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN,
                                 description="score jobs: consecutive pairs sharing it are ranked together")
    fields: dict[str, JsonValue] | None = Field(None, description="more fields of the document, for output.include_fields")


class InlineInput(_Strict):
    """Small inputs sent in the request body."""

    documents: list[InlineDocument] = Field(min_length=1)


class UriInput(_Strict):
    """An object in the store, JSONL (one JSON object per line, gzip too) or Parquet, or a prefix
    ending in ``/``: every ``*.jsonl``, ``*.jsonl.gz`` and ``*.parquet`` object under it, read one
    after another in key order."""

    uri: str = Field(description="s3://bucket/key.jsonl or s3://bucket/key.parquet, or s3://bucket/prefix/ for every "
                                 "*.jsonl, *.jsonl.gz and *.parquet object under it")
    id_field: str = Field("id", description="field (Parquet: column) holding each record's id: a string or integer")
    text_field: str = Field("text", description="field (Parquet: column) holding each record's text: a string")
    spans_field: str = Field("chunk_spans", description="field holding [[start, end], ...] for chunk_by='spans'")
    query_field: str = Field("query", description="score jobs: field holding each pair's first text")
    query_id_field: str = Field("query_id", description="score jobs: field grouping consecutive pairs for their rank")


# Every component of an L2-normalized vector lies in it: int8's default calibration for such models.
UNIT_RANGE = (-1.0, 1.0)


class OutputOptions(_Strict):
    """How vectors are stored: ``dtype`` (see poolq.storage.embedding_codec), Matryoshka ``dimensions``,
    and int8's calibration range, fixed for the whole job."""

    format: Literal["parquet"] = "parquet"
    dtype: Literal["float32", "float16", "int8", "binary"] = "float32"
    dimensions: int | None = Field(
        None, ge=1, description="Matryoshka: keep the first N dimensions (then L2-normalize, on normalized models)"
    )
    int8_range: tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description="int8: [min, max] mapped onto -128..127; default [-1, 1] for L2-normalized models"
    )
    sparse_top_k: int | None = Field(None, ge=1, description="sparse_embed: keep the K largest weights of each vector")
    sparse_min_weight: FiniteFloat | None = Field(None, ge=0, description="sparse_embed: drop weights below this")
    activation: bool = Field(True, description="classify: scores after the model's activation; false: raw logits")
    label_threshold: FiniteFloat = Field(
        0.5, ge=0, le=1, description="classify, multi-label models: ``labels`` lists those scoring at least this"
    )
    token_label_scores: bool = Field(
        False, description="token_classify: also store every label's probability for each token "
        "(``token_label_scores``, in the label order of the manifest's output.labels)"
    )
    include_fields: list[Annotated[str, Field(min_length=1, max_length=128)]] | None = Field(
        None, max_length=32, description="input fields copied into every output row (a Parquet column keeps its Arrow "
        "type, a JSONL field gets a JSON-typed column; null if missing)"
    )

    @field_validator("include_fields")
    @classmethod
    def _check_include_fields(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("include_fields names a field twice")
        return value

    @field_validator("int8_range")
    @classmethod
    def _check_int8_range(cls, value: tuple[float, float] | None, info: ValidationInfo) -> tuple[float, float] | None:
        if value is not None and info.data.get("dtype") != "int8":
            raise ValueError("int8_range applies to dtype 'int8' only")
        if value is not None and not value[0] < value[1]:
            raise ValueError(f"int8_range must be [min, max] with min < max, got {list(value)}")
        if value is not None:
            codec_for("int8", value)  # the codec's own checks: a step it can quantize with
        return value

    def codec(self, normalized: bool) -> EmbeddingCodec:
        """The job's encoding. ``normalized``: the model L2-normalizes its vectors (then int8 defaults
        to ``UNIT_RANGE``); raises ValueError for int8 without a range on a model that does not."""
        value_range = self.int8_range or (UNIT_RANGE if normalized else None)
        try:
            return codec_for(self.dtype, value_range)
        except ValueError as exc:
            raise ValueError(
                f"{exc}: this model does not L2-normalize its vectors, so the default [-1, 1] does not bound "
                "them; set output.int8_range to the range of its values"
            ) from None


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class LongDocuments(LongDocumentPolicy):
    """What to do with documents longer than the model's window: the engine's LongDocumentPolicy
    itself (fields, defaults and checks are declared there, once), validated as part of a job."""

    def policy(self) -> LongDocumentPolicy:
        return self


# The tasks a job may ask for (each one's output format: poolq.jobs.tasks).
JobTaskName = Literal["embed", "sparse_embed", "classify", "score", "token_embed", "token_classify"]
ScoreMode = Literal["auto", "cross_encoder", "cosine", "maxsim"]
# Tasks one forward pass can serve together (BGE-M3's hybrid-search outputs), as one row set.
COMBINABLE_TASKS = ("embed", "sparse_embed", "token_embed")
_TASK_NAMES = get_args(JobTaskName)


def _parse_tasks(value: object) -> str | list[str]:
    """A task name, or a list of two or more combinable ones (in one column order, whatever the
    request's); one error naming what is wrong, at ``task`` itself."""
    if isinstance(value, str):
        if value not in _TASK_NAMES:
            raise ValueError(f"unknown task {value!r}; tasks: {', '.join(_TASK_NAMES)}")
        return value
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ValueError("task must be a task name or a list of task names")
    if len(value) < 2 or len(set(value)) != len(value):
        raise ValueError("a list of tasks names two or more different tasks (one task is a string)")
    if not set(value) <= set(COMBINABLE_TASKS):
        raise ValueError(f"tasks combined in one job are among {', '.join(COMBINABLE_TASKS)}; got {', '.join(value)}")
    return [name for name in COMBINABLE_TASKS if name in value]


JobTasks = Annotated[
    str | list[str],
    PlainValidator(_parse_tasks),
    WithJsonSchema({"anyOf": [{"type": "string", "enum": list(_TASK_NAMES)},
                              {"type": "array", "items": {"type": "string", "enum": list(COMBINABLE_TASKS)},
                               "minItems": 2, "uniqueItems": True}]}),
]


class JobSpec(_Strict):
    """The body of ``POST /v1/jobs``."""

    model: str = DEFAULT_MODEL
    task: JobTasks = Field(
        "embed", description="embed (dense vectors), sparse_embed (SPLADE), classify, score (pairs), token_embed "
        "(multi-vector), token_classify (token labels, entities); or a list of embed, sparse_embed, token_embed: "
        "all of them from one forward pass, one column group each",
    )
    score_mode: ScoreMode = Field(
        "auto", description="score jobs: cross_encoder, cosine (bi-encoder) or maxsim (late interaction); auto: the "
        "first of those the model serves",
    )
    input: InlineInput | UriInput
    output: OutputOptions = Field(default_factory=OutputOptions)
    long_documents: LongDocuments = Field(default_factory=LongDocuments)
    incremental_from: str | None = Field(
        None, pattern=r"^[0-9a-f]{32}$",
        description="an earlier job: documents whose id and content hash match its output (same model and "
        "options) are carried over instead of embedded again",
    )


    @property
    def task_label(self) -> str:
        """The task as statuses and manifests name it: ``embed``, or ``embed+sparse_embed+token_embed``."""
        return self.task if isinstance(self.task, str) else "+".join(self.task)


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


class JobRates(BaseModel):
    """Throughput since the job started (running shards' progress included) and the time left at
    that pace; None while unknown (not started, nothing done yet, no total)."""

    tokens_per_s: float | None = None
    documents_per_s: float | None = None
    eta_s: float | None = None


class JobProgress(BaseModel):
    """Work the running shards have done and not committed yet (it moves between commits)."""

    documents: int = 0
    tokens: int = 0


class JobResult(BaseModel):
    manifest_uri: str


LOCAL_TENANT = "local"  # the tenant of in-process runs (`poolq embed`), which have no API keys


_JOB_ID = re.compile(r"^[0-9a-f]{32}$")


class _MonotonicIds:
    """Ids that strictly increase within a process, as ULID's monotonic generator makes them: in
    the same millisecond as the previous id (or after the clock stepped back) the previous random
    part plus one. Without it two ids of one millisecond sorted at random, and a listing "newest
    first" could put them the wrong way round. Across processes ids of one millisecond still sort
    by chance."""

    _RANDOM_BITS = 80

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = (0, 0)  # (milliseconds, random part) of the latest id

    def next(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            last_ms, last_random = self._last
            if ms > last_ms:
                random = secrets.randbits(self._RANDOM_BITS - 1)  # half the range left to count up in
            elif last_random + 1 < 1 << self._RANDOM_BITS:
                ms, random = last_ms, last_random + 1
            else:  # 2**79 ids in one millisecond: borrow the next one
                ms, random = last_ms + 1, secrets.randbits(self._RANDOM_BITS - 1)
            self._last = (ms, random)
        return f"{ms:012x}{random:020x}"


_job_ids = _MonotonicIds()


def new_job_id() -> str:
    """32 hex digits: milliseconds since the epoch (12), then 80 bits, random at each new
    millisecond; strictly increasing within a process, so ids sort by creation."""
    return _job_ids.next()


def is_job_id(value: str) -> bool:
    """Job ids are 32 lowercase hex digits; anything else never reaches the store as a key."""
    return bool(_JOB_ID.match(value))


class JobNotFound(LookupError):
    """No such job (or not one the caller may see)."""


class JobStatus(BaseModel):
    """What ``GET /v1/jobs/{id}`` returns."""

    id: str
    tenant: str = LOCAL_TENANT
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
    errors_by_code: dict[str, int] = Field(default_factory=dict)  # failed records by error code
    error_samples: list[str] = Field(default_factory=list)  # the first few error messages
    in_progress: JobProgress = Field(default_factory=JobProgress)
    rates: JobRates = Field(default_factory=JobRates)  # filled in when the status is read (GET /v1/jobs/{id})
