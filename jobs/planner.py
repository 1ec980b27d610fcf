"""Planning: stream the input once, validate each record, and cut it into bounded shards."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import BinaryIO, Iterator

from storage import dump_jsonl, open_uri, read_jsonl

from .context import JobContext
from .job import InlineInput, JobSpec, JobState
from .records import InputRecord, RecordError, to_record


@dataclass
class _ShardBuffer:
    max_documents: int
    max_chars: int
    rows: list[dict] = field(default_factory=list)
    chars: int = 0

    def would_overflow(self, record: InputRecord) -> bool:
        too_many = len(self.rows) >= self.max_documents
        too_long = self.chars + len(record.text) > self.max_chars
        return bool(self.rows) and (too_many or too_long)

    def add(self, record: InputRecord) -> None:
        self.rows.append(record.to_json())
        self.chars += len(record.text)


def plan_job(job_id: str, ctx: JobContext) -> int:
    """Write the job's shard inputs and enqueue one task per shard. Returns the shard count."""
    spec = ctx.spec(job_id)
    layout = ctx.layout(job_id)
    ctx.status.update(job_id, status=JobState.RUNNING, started_at=datetime.now(timezone.utc))
    settings = ctx.settings
    buffer = _ShardBuffer(settings.shard_max_documents, settings.shard_max_chars)
    errors: list[RecordError] = []
    seen_ids: set[str] = set()
    num_shards = total = 0
    with _open_input(spec, job_id, ctx) as stream:
        for record in _records(stream, spec):
            total += 1
            if isinstance(record, InputRecord) and record.id in seen_ids:
                record = RecordError(record.id, record.line, "duplicate_id", f"line {record.line}: id {record.id!r} appeared before")
            if isinstance(record, RecordError):
                errors.append(record)
                continue
            seen_ids.add(record.id)
            if buffer.would_overflow(record):
                ctx.store.put(layout.shard_input(num_shards), dump_jsonl(buffer.rows))
                num_shards += 1
                buffer = _ShardBuffer(settings.shard_max_documents, settings.shard_max_chars)
            buffer.add(record)
    if buffer.rows:
        ctx.store.put(layout.shard_input(num_shards), dump_jsonl(buffer.rows))
        num_shards += 1
    ctx.store.put(layout.plan_errors, dump_jsonl([error.to_json() for error in errors]))
    ctx.status.update(job_id, total=total, num_shards=num_shards)
    ctx.status.add_progress(job_id, failed=len(errors))
    if num_shards == 0:
        ctx.enqueuer.finalize(job_id)
    for shard in range(num_shards):
        ctx.enqueuer.run_shard(job_id, shard)
    return num_shards


def _open_input(spec: JobSpec, job_id: str, ctx: JobContext) -> BinaryIO:
    if isinstance(spec.input, InlineInput):
        return ctx.store.open(ctx.layout(job_id).inline_input)
    store, key = open_uri(spec.input.uri, ctx.settings.s3_config())
    return store.open(key)


def _records(stream: BinaryIO, spec: JobSpec) -> Iterator[InputRecord | RecordError]:
    inline = isinstance(spec.input, InlineInput)
    id_field = "id" if inline else spec.input.id_field
    text_field = "text" if inline else spec.input.text_field
    spans_field = "chunk_spans" if inline else spec.input.spans_field
    for item in read_jsonl(stream):
        yield to_record(item, id_field, text_field, spans_field)
