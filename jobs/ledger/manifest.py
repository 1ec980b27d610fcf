"""The manifest: a finished job's public record, written last (conditionally) beside its parts.

Defined once, here. The finalizer builds it, the ledger parses it once, and every reader (the
results route, recovery, incremental baselines, cleanup, schedules) reads its fields. Readers of
the bucket rely on it, so fields are only ever added: ``version`` says which were written.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from poolq.jobs.ledger.error_summary import ErrorSummary
from poolq.jobs.report.data_report import DataReport
from poolq.jobs.spec.engine_identity import EngineIdentity
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.reuse_counts import ReuseCounts
from poolq.jobs.spec.sink_config import SinkOutcome, SinkState

MANIFEST_VERSION = 4  # 3: output.schema; 4: counts.superseded


class _ManifestBlock(BaseModel):
    # Unknown fields are kept, not refused: a manifest written by a newer poolq still loads.
    model_config = ConfigDict(extra="allow")
    # Optional fields written only when they apply (absent, not null, as the bucket always had them).
    _omitted_when_none: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_fields_that_do_not_apply(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        return {key: value for key, value in data.items() if not (value is None and key in self._omitted_when_none)}


class ManifestPart(_ManifestBlock):
    """One Parquet part of the output."""

    key: str
    uri: str
    rows: int
    shard: int | None = None  # absent for rows carried over from an earlier run
    _omitted_when_none: ClassVar[tuple[str, ...]] = ("shard",)


class ManifestErrors(_ManifestBlock):
    """The job's error file: one JSON line per record that failed."""

    key: str
    uri: str
    count: int
    by_code: dict[str, int] = Field(default_factory=dict)  # the failed records by error code
    samples: list[str] = Field(default_factory=list)  # the first few messages

    @property
    def summary(self) -> ErrorSummary:
        return ErrorSummary(dict(self.by_code), tuple(self.samples))


class ManifestCounts(_ManifestBlock):
    """Documents (not rows), except ``rows``: Parquet rows over all parts."""

    total: int
    completed: int
    failed: int
    not_processed: int = 0  # a cancelled or failed job's documents that were never embedded
    carried: int = 0  # unchanged documents copied from an earlier run
    rows: int = 0
    # A superseding input's (``input.supersede``) records replaced by a later object's with the same
    # id: in no part and no error file, and not in ``total``. Written only for such an input.
    superseded: int | None = None
    _omitted_when_none: ClassVar[tuple[str, ...]] = ("superseded",)


class ManifestShards(_ManifestBlock):
    total: int
    committed: int
    gave_up: int = 0
    # A cancelled or failed job's shards no attempt committed (written only for such a job): their
    # records are in no part and no error file, counted as not processed (the shard descriptors of
    # the job's planning name them). Records of a shard that a cancel stopped half-way are in the
    # error file, code ``not_processed``.
    not_started: list[int] | None = None
    _omitted_when_none: ClassVar[tuple[str, ...]] = ("not_started",)


class ManifestUsage(_ManifestBlock):
    tokens: int


class ManifestTimings(_ManifestBlock):
    """Seconds queued (created -> started) and running (started -> finished); None if unknown."""

    queued_s: float | None = None
    running_s: float | None = None


class ManifestColumn(_ManifestBlock):
    """One column of the parts' Parquet schema: its name and Arrow type (as pyarrow prints it)."""

    name: str
    type: str
    nullable: bool = True


class OutputEncoding(_ManifestBlock):
    """The parts' schema (``schema``: every column, in order), how the ``embedding`` column of an
    embed job is stored and what decoding it needs.

    ``int8``: ``x = (q - zero_point) * scale`` over ``[min, max]``; ``binary``: ``threshold`` and
    ``bit_order``. Parameters of other dtypes are absent rather than null."""

    format: str
    dimensions: int | None
    dtype: str
    # ``schema`` is a BaseModel attribute, so the field has another name and is written as "schema".
    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)
    schema_: list[ManifestColumn] | None = Field(None, alias="schema")  # written since version 3
    sparse_aggregation: str | None = None  # sparse_embed: how token weights reduce over positions (max, sum)
    labels: list[str] | None = None  # classifiers: label names in the order of the scores columns (id2label)
    min: float | None = None
    max: float | None = None
    scale: float | None = None
    zero_point: float | None = None
    threshold: str | None = None
    bit_order: str | None = None
    _omitted_when_none: ClassVar[tuple[str, ...]] = ("min", "max", "scale", "zero_point", "threshold", "bit_order", "schema",
                                                     "sparse_aggregation", "labels")


class ManifestSink(_ManifestBlock, SinkOutcome):
    """A sink load's outcome as the manifest keeps it (``SinkOutcome``; a newer poolq's fields kept)."""


LOADABLE_STATES = frozenset({JobState.SUCCEEDED, JobState.PARTIALLY_SUCCEEDED})  # a job with rows to load


def pending_sinks(sink: str | None, state: JobState) -> list[ManifestSink] | None:
    """The manifest's first ``sinks``: pending for a job with rows to load, skipped otherwise."""
    if sink is None:
        return None
    return [ManifestSink(name=sink, state=SinkState.PENDING if state in LOADABLE_STATES else SinkState.SKIPPED)]


class JobManifest(_ManifestBlock):
    """``manifest.json``: what a finished job produced, where it is, and how it was made."""

    version: int = MANIFEST_VERSION
    job_id: str
    status: JobState
    model: str
    task: str
    options: dict[str, Any]  # the job spec without its input: what the output depends on
    engines: list[str] = []  # engine identities that made the vectors (model files + dtype)
    # The one engine identity the rows come from (model, revision, dtype, pooling, head, device); None
    # if no shard embedded any, or several engines did (allow_mixed_engines: ``engines`` lists them).
    engine: EngineIdentity | None = None
    columns: list[str]
    dimensions: int | None
    output: OutputEncoding | None = None
    counts: ManifestCounts
    shards: ManifestShards
    usage: ManifestUsage
    parts: list[ManifestPart]
    errors: ManifestErrors
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime
    timings: ManifestTimings = ManifestTimings()
    error: str | None = None  # why the job failed as a whole (None when records failed one by one)
    sinks: list[ManifestSink] | None = None  # a job naming a sink: its load's outcome (rewritten as it goes)
    report: DataReport | None = None  # the data report (jobs/report/): lengths, cuts, duplicates; absent before it
    reuse: ReuseCounts | None = None  # what content-addressed reuse saved (docs/reuse.md); None before it existed
    # Manifests written before sinks, reports, reuse and the engine block stay as they were.
    _omitted_when_none: ClassVar[tuple[str, ...]] = ("sinks", "report", "reuse", "engine")

    def to_json_bytes(self) -> bytes:
        return self.model_dump_json(indent=2).encode()

    @classmethod
    def from_json_bytes(cls, raw: bytes) -> "JobManifest":
        return cls.model_validate_json(raw)
