"""What a client submits: the job spec (``POST /v1/jobs``), its input, output and long-document options."""
from __future__ import annotations

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
from poolq.engine.loading.registry import MAX_MODEL_NAME_CHARS
from poolq.jobs.spec.record_ids import ID_PATTERN, MAX_ID_LENGTH
from poolq.jobs.spec.sink_config import SinkName
from poolq.jobs.spec.webhook import WebhookTarget
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

    def as_row(self) -> dict:
        """The document as the JSONL line it is stored as (and planning reads): its ``fields`` beside id and text."""
        row = self.model_dump(exclude_none=True, exclude={"fields"})
        return {**(self.fields or {}), **row}


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
    supersede: bool = Field(False, description="a prefix read as versions of one corpus (a tenant's uploads): objects "
                            "are read oldest first (last-modified, then key) and an object's record replaces the records "
                            "of older objects with its id (counted as superseded, not failed); a repeat within one "
                            "object is still a duplicate_id. Schedules default it to true")


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

    def one_vector_per_input(self, where: str) -> LongDocuments:
        """This policy, if it makes one vector per input (``where`` returns one per input: the
        embeddings endpoint, a batch line); a chunk-row mode is refused, naming the modes that fit."""
        if self.mode.chunk_rows:
            raise ValueError(f"mode {self.mode.value!r} makes one vector per chunk; {where} returns one per input: "
                             "use 'error', 'truncate' or 'chunked' (or a job for chunk rows)")
        return self


# The compute dtype a job may pin; auto: what the worker that runs its first shard computes in
# (Settings.serving.dtype, itself auto by default), then every shard in that one (jobs/steps/shards/engine_choice.py).
ComputeDtype = Literal["auto", "float32", "float16", "bfloat16", "int8"]

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


# job: a text is computed once per job; tenant: also copied from, and stored for, the tenant's other jobs
ReuseMode = Literal["job", "tenant"]


class PromptOptions(BaseModel):
    """The prompt put before each text, as sentence-transformers' ``encode(prompt_name=..., prompt=...)``:
    on a job, a ``/v1/embeddings`` request and a batch's ``body.poolq`` alike."""

    # Left out of dumps while unset, so the spec, manifest and reuse scope of a job without a prompt are
    # what they were before prompts existed (earlier jobs' reuse and incremental runs still match).
    prompt_name: str | None = Field(
        None, min_length=1, max_length=200, exclude_if=lambda value: value is None,
        description="one of the model's named prompts (config_sentence_transformers.json), put before each text "
        "as sentence-transformers does; default: the model's default prompt, if it declares one",
    )
    prompt: str | None = Field(
        None, max_length=4096, exclude_if=lambda value: value is None,
        description="a literal prompt put before each text instead (not with prompt_name)",
    )

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, prompt: str | None, info: ValidationInfo) -> str | None:
        # A field's validator, so the refusal names the field (``prompt``), not the body as a whole
        if prompt is not None and info.data.get("prompt_name") is not None:
            raise ValueError("give prompt_name (one of the model's prompts) or prompt (literal text), not both")
        return prompt


class JobLimits(_Strict):
    """What a job may spend (docs/budgets.md). Tokens are those the model runs, the job's ``usage.tokens``:
    texts copied by reuse or carried from an earlier run cost none."""

    max_tokens: int = Field(gt=0, description="refused at submit (422) when the job's estimated computed tokens "
                            "exceed it; a running job that reaches it stops as a cancel does, the rest not processed "
                            "(code budget_exceeded)")


class JobSpec(_Strict, PromptOptions):
    """The body of ``POST /v1/jobs``."""

    model: str = Field(
        DEFAULT_MODEL, min_length=1, max_length=MAX_MODEL_NAME_CHARS,
        description="a model this server serves: a packaged or configured name, or a Hugging Face Hub id "
        "org/name[@revision] the operator allows (POOLQ_MODELS_ALLOW); a Hub id is pinned to its commit when the "
        "job is accepted (docs/models.md)",
    )
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
    reuse: ReuseMode = Field(
        "job", description="job: a text repeated in this job is computed once; tenant: also copy outputs computed "
        "by this tenant's earlier jobs (same model and options), and keep this job's for later ones (docs/reuse.md)",
    )
    sink: SinkName | None = Field(
        None, description="a sink the operator configured (POOLQ_SINKS) and granted to the tenant: once the job's parts "
        "are committed, its rows are loaded there (docs/sinks/)",
    )
    webhook: WebhookTarget | None = Field(
        None, description="where to POST the job's signed events (its end): docs/webhooks.md",
    )
    compute_dtype: ComputeDtype = Field(
        "auto", description="what the model computes in; auto: the dtype of the worker that runs the first shard "
        "(bf16 where the hardware runs it natively), then every shard in it. A pinned dtype is computed by any "
        "worker, natively or emulated (bf16 on an AVX2 CPU: same vectors, slower)",
    )
    allow_mixed_engines: bool = Field(
        False, description="let each worker embed this job's shards with its own engine (its own dtype unless "
        "compute_dtype pins one, its model files, its device kind); by default all rows come from one engine "
        "identity, the manifest's engine block",
    )
    # Left out of dumps while unset, so the spec of a job without limits is what it was before them.
    limits: JobLimits | None = Field(
        None, exclude_if=lambda value: value is None,
        description="what the job may spend: max_tokens (docs/budgets.md); the operator's per-job default and "
        "ceiling apply when set (POOLQ_TENANT_MAX_TOKENS_PER_JOB)",
    )

    @property
    def supersedes(self) -> bool:
        """The input is versions of one corpus: each id's record in the latest object holding it wins."""
        return isinstance(self.input, UriInput) and self.input.supersede

    @property
    def task_label(self) -> str:
        """The task as statuses and manifests name it: ``embed``, or ``embed+sparse_embed+token_embed``."""
        return self.task if isinstance(self.task, str) else "+".join(self.task)
