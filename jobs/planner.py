"""Planning: stream the input once, validate each record, cut it into bounded shards, and write
the plan to the ledger. Deterministic: a repeated planning writes the same shard inputs."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import BinaryIO, Iterator

from storage import dump_jsonl, open_uri, read_jsonl

from .context import JobContext
from .dispatch import PLAN_UNIT, dispatch_finalize, dispatch_shards, finalize_if_ready, shard_unit
from .job import InlineInput, JobSpec, JobState
from .ledger import Plan
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


def plan_job(job_id: str, ctx: JobContext) -> Plan | None:
    """Plan ``job_id`` (once) and send its shards' tasks. Returns the plan, or None if not planned now."""
    ledger = ctx.ledger(job_id)
    if ledger.cancel_requested():
        finalize_if_ready(job_id, ctx)
        return None
    plan = ledger.plan()
    if plan is None:
        lease = ctx.leases.acquire(job_id, PLAN_UNIT, ctx.settings.lease_ttl_s)
        if lease is None:
            return None  # another planner is at it
        try:
            ctx.status.transition(job_id, JobState.RUNNING, started_at=datetime.now(timezone.utc))
            plan = _write_plan(job_id, ctx)
        finally:
            ctx.leases.release(lease)
    _publish(job_id, plan, ctx)
    return plan


def _write_plan(job_id: str, ctx: JobContext) -> Plan:
    spec = ctx.spec(job_id)
    layout = ctx.layout(job_id)
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
    plan = Plan(num_shards=num_shards, total=total, plan_errors=len(errors))
    ledger = ctx.ledger(job_id)
    if not ledger.write_plan(plan):
        plan = ledger.plan() or plan  # a concurrent planner wrote the same plan first
    return plan


def _publish(job_id: str, plan: Plan, ctx: JobContext) -> None:
    """Cache the plan in the status store and send the tasks of shards not yet committed or running."""
    ctx.status.update(job_id, total=plan.total, num_shards=plan.num_shards, expected_units=plan.num_shards + 1)
    ctx.status.count_unit(job_id, PLAN_UNIT, completed=plan.carried_records, failed=plan.plan_errors)
    if plan.num_shards == 0:
        dispatch_finalize(job_id, ctx)
        return
    commits = ctx.ledger(job_id).commits()
    running = set(ctx.leases.live_units(job_id))
    todo = [shard for shard in range(plan.num_shards) if shard not in commits and shard_unit(shard) not in running]
    dispatch_shards(job_id, todo, ctx)


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
