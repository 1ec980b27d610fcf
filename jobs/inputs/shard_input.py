"""What a shard names: ranges of one input object, not a copy of its records.

Planning streams the input once and, for each shard, writes a small descriptor: the object's URI,
its version when planned, and runs holding the shard's records (consecutive lines that were
accepted; a rejected, duplicate or carried line ends a run). A JSONL object's runs are bytes, read
again with a ranged GET; a Parquet object's are rows, read again from their row groups. Each record
is validated again, within the record limits planning read it with (kept in the descriptor),
which gives the same records: the bucket holds the corpus once. A gzip-compressed object cannot
be addressed by byte ranges, so its shards hold their records themselves, as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from pydantic import BaseModel, Field

from poolq.jobs.inputs.input_format import InputFormat
from poolq.jobs.inputs.records import InputRecord, RecordError, to_record
from poolq.jobs.spec.job_spec import InlineInput, JobSpec
from poolq.storage import JsonlLineError, JsonlObject, ObjectInfo, ObjectStore, S3Config, open_uri, read_jsonl
from poolq.storage.input_limits import InputLimits
from poolq.storage.parquet_input import ParquetInput

# (first, end, line number of the first), end exclusive: bytes of a JSONL object, row indices of a Parquet one
Run = tuple[int, int, int]


class InputChanged(ValueError):
    """The input object is not the one that was planned: its records cannot be read back."""


class ShardInput(BaseModel):
    """One shard's records: runs of ``uri`` (or, for a compressed input, the records themselves)."""

    uri: str | None = None  # the object the runs are in
    version: str | None = None  # ObjectInfo.version of the object when it was planned
    source: str | None = None  # the object's name in error messages (prefix inputs); else None
    runs: list[Run] = Field(default_factory=list)
    records: list[InputRecord] = Field(default_factory=list)  # copies, for lines no byte range addresses (gzip)
    documents: int = 0
    format: InputFormat = InputFormat.JSONL  # what the runs count: bytes (JSONL) or rows (Parquet)
    # What planning read each record within: the runs are read back within the same (None: no bound,
    # as a descriptor written before records were bounded was planned).
    limits: InputLimits | None = None

    def to_bytes(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes) -> "ShardInput":
        return cls.model_validate_json(raw)

    def add(self, record: InputRecord, item: JsonlObject, continues_run: bool) -> None:
        """Take ``record`` (read as ``item``); ``continues_run``: nothing was left out since the last one."""
        self.documents += 1
        if item.offset is None:
            self.records.append(record)
            return
        end = item.offset + item.size
        if continues_run and self.runs and self.runs[-1][1] <= item.offset:
            start, _, line = self.runs[-1]
            self.runs[-1] = (start, end, line)
        else:
            self.runs.append((item.offset, end, item.line))


@dataclass(frozen=True)
class InputFields:
    """The job's field names, for validating records again when a shard reads them back."""

    id_field: str = "id"
    text_field: str = "text"
    spans_field: str = "chunk_spans"
    query_field: str | None = None  # score jobs: the field holding each pair's first text
    query_id_field: str | None = None  # score jobs: the field grouping pairs for their rank
    include_fields: tuple[str, ...] = ()  # output.include_fields: carried into every output row

    @classmethod
    def of(cls, spec: JobSpec) -> "InputFields":
        included = tuple(spec.output.include_fields or ())
        names = ("id", "text", "chunk_spans") if isinstance(spec.input, InlineInput) else (
            spec.input.id_field, spec.input.text_field, spec.input.spans_field)
        if spec.task != "score":
            return cls(*names, include_fields=included)
        pair_names = ("query", "query_id") if isinstance(spec.input, InlineInput) else (
            spec.input.query_field, spec.input.query_id_field)
        return cls(*names, *pair_names, include_fields=included)

    @property
    def groups_pairs(self) -> bool:
        """Records may carry a query id: a query's consecutive pairs stay in one shard, to be ranked."""
        return self.query_id_field is not None

    def columns(self) -> tuple[str, ...]:
        """The fields a record is made of: what is read of a Parquet row."""
        names = (self.id_field, self.text_field, self.spans_field, self.query_field, self.query_id_field,
                 *self.include_fields)
        return tuple(dict.fromkeys(name for name in names if name is not None))

    def record(self, item: JsonlObject | JsonlLineError) -> InputRecord | RecordError:
        """Validate one parsed line against these fields."""
        return to_record(item, self.id_field, self.text_field, self.spans_field, self.query_field, self.query_id_field,
                         self.include_fields)


def read_shard_records(shard_input: ShardInput, fields: InputFields, s3_config: S3Config) -> dict[str, InputRecord]:
    """The shard's records by id, read back from the runs of its input (or copied in it)."""
    records = {record.id: record for record in shard_input.records}
    if not shard_input.runs or shard_input.uri is None:
        return records
    store, key = open_uri(shard_input.uri, s3_config)
    info = _check_unchanged(store, key, shard_input)
    for item in _RUN_READERS[shard_input.format](store, key, info, shard_input.runs, fields, shard_input.limits):
        record = fields.record(item)
        if not isinstance(record, InputRecord):
            raise InputChanged(f"{shard_input.uri}: {item.unit} {item.line} is not the record that was planned")
        records[record.id] = record
    if len(records) != shard_input.documents:
        raise InputChanged(f"{shard_input.uri}: {len(records)} records where {shard_input.documents} were planned")
    return records


def _jsonl_runs(store: ObjectStore, key: str, info: ObjectInfo, runs: list[Run], fields: InputFields,
                limits: InputLimits | None) -> Iterator[JsonlObject | JsonlLineError]:
    for start, end, line in runs:
        with store.open_range(key, start, end) as stream:
            yield from read_jsonl(stream, first_line=line, start_offset=start, limits=limits)


def _parquet_runs(store: ObjectStore, key: str, info: ObjectInfo, runs: list[Run], fields: InputFields,
                  limits: InputLimits | None) -> Iterator[JsonlObject | JsonlLineError]:
    """The runs' rows, each row group they are in read once (a row's number is its place: no line)."""
    parquet = ParquetInput(store, key, info.size, limits)
    yield from parquet.rows([(start, end) for start, end, _ in runs], fields.columns())


_RUN_READERS = {InputFormat.JSONL: _jsonl_runs, InputFormat.PARQUET: _parquet_runs}


def _check_unchanged(store: ObjectStore, key: str, shard_input: ShardInput) -> ObjectInfo:
    info = store.stat(key)
    if shard_input.version is not None and info.version != shard_input.version:
        raise InputChanged(f"{shard_input.uri} was replaced after the job was planned (version {shard_input.version} "
                           f"then, {info.version} now): submit the job again")
    return info
