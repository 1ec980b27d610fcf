"""Planning: stream the input (inline, one object or a prefix) once, validate each record, set
aside the documents an incremental job carries from its baseline, cut the rest into bounded
shards, and write the plan to the ledger. Deterministic: a repeated planning writes the same
shard inputs and carried parts."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterator

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.leases import LeaseKeeper
from poolq.jobs.inputs.input_reader import InputObject, input_lines
from poolq.jobs.inputs.records import InputRecord, RecordError, to_record
from poolq.jobs.job import InlineInput, JobSpec, JobState
from poolq.jobs.ledger.job_ledger import Plan
from poolq.jobs.steps.dispatch import PLAN_UNIT, dispatch_finalize, fill_window, finalize_if_ready
from poolq.jobs.steps.incremental import Baseline
from poolq.jobs.steps.shard_input import InputFields, ShardInput
from poolq.storage import JsonlLineError, JsonlObject, dump_jsonl

# Characters per token, to estimate a shard's work before anything is tokenized (English text
# with WordPiece/BPE vocabularies runs at 4-5; erring low sizes shards a little small, not large).
CHARS_PER_TOKEN = 4.0
SPECIAL_TOKENS_PER_DOCUMENT = 2


def estimated_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1 + SPECIAL_TOKENS_PER_DOCUMENT


@dataclass
class _ShardBuffer:
    """The shard being cut: its records' byte runs in one input object, and its estimated work."""

    max_documents: int
    max_chars: int
    max_tokens: int
    source: InputObject | None = None
    shard: ShardInput = field(default_factory=ShardInput)
    chars: int = 0
    tokens: int = 0

    def would_overflow(self, record: InputRecord, source: InputObject) -> bool:
        too_many = self.shard.documents >= self.max_documents
        too_long = self.chars + len(record.text) > self.max_chars
        too_much_work = self.tokens + estimated_tokens(record.text) > self.max_tokens
        other_object = self.source is not None and source != self.source
        return bool(self.shard.documents) and (too_many or too_long or too_much_work or other_object)

    def add(self, record: InputRecord, item: JsonlObject, source: InputObject, continues_run: bool) -> None:
        if self.source is None:
            self.source = source
            self.shard = ShardInput(uri=source.uri, version=source.version, source=source.name)
        self.shard.add(record, item, continues_run)
        self.chars += len(record.text)
        self.tokens += estimated_tokens(record.text)


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
            # Renewed while it plans, however long the input: no second planner starts meanwhile.
            with LeaseKeeper(ctx.leases, lease, ctx.settings.lease_ttl_s):
                plan = _write_plan(job_id, ctx)
        finally:
            ctx.leases.release(lease)
    _publish(job_id, plan, ctx)
    return plan


def _write_plan(job_id: str, ctx: JobContext) -> Plan:
    """Stream the input once: errors aside, carried documents aside (incremental), shards for the
    rest; then carried parts, the error file and, last, ``plan.json`` (the commit point)."""
    spec = ctx.spec(job_id)
    baseline = Baseline.load(spec, ctx)
    shards = _ShardWriter(ctx, job_id)
    errors: list[dict] = []
    seen_ids: set[str] = set()
    carried_ids: set[str] = set()
    total = 0
    where = _ReadPosition(spec)
    try:
        for source, item, record in _records(spec, job_id, ctx):
            where.at(source.name, record.line)
            total += 1
            if isinstance(record, InputRecord) and record.id in seen_ids:
                record = _duplicate(record)
            if isinstance(record, RecordError):
                errors.append(_error_line(record, source.name))
                shards.skip()
                continue
            seen_ids.add(record.id)
            if baseline is not None and baseline.unchanged(record):
                carried_ids.add(record.id)
                shards.skip()
            elif isinstance(item, JsonlObject):
                shards.add(record, item, source)
        num_shards = shards.close()
    except Exception as exc:  # not about one record (those are errors above): say where reading stopped
        exc.add_note(where.describe())
        raise
    carried = baseline.write_carried(job_id, carried_ids, ctx) if baseline is not None else ()
    ctx.store.put(ctx.layout(job_id).plan_errors, dump_jsonl(errors))
    plan = Plan(num_shards=num_shards, total=total, plan_errors=len(errors), carried=carried, carried_records=len(carried_ids),
                engine=ctx.engine_identity(spec.model) if carried_ids else None)  # what Baseline.load checked
    ledger = ctx.ledger(job_id)
    if not ledger.write_plan(plan):
        plan = ledger.plan() or plan  # a concurrent planner wrote the same plan first
    else:  # this planner's plan counts: its rejected records, once
        ctx.metrics.plan_errors(Counter(error["code"] for error in errors))
    return plan


class _ShardWriter:
    """Cuts records into bounded shards and writes each shard's input as it fills."""

    def __init__(self, ctx: JobContext, job_id: str) -> None:
        self.ctx = ctx
        self.layout = ctx.layout(job_id)
        self.num_shards = 0
        self.skipped = False
        self.buffer = self._new_buffer()

    def _new_buffer(self) -> _ShardBuffer:
        settings = self.ctx.settings
        return _ShardBuffer(settings.shard_max_documents, settings.shard_max_chars, settings.shard_token_budget)

    def add(self, record: InputRecord, item: JsonlObject, source: InputObject) -> None:
        if self.buffer.would_overflow(record, source):
            self._flush()
        self.buffer.add(record, item, source, continues_run=not self.skipped)
        self.skipped = False

    def skip(self) -> None:
        """A line the shards leave out (an error, a duplicate, a carried document): it ends a run."""
        self.skipped = True

    def _flush(self) -> None:
        self.ctx.store.put(self.layout.shard_input(self.num_shards), self.buffer.shard.to_bytes())
        self.num_shards += 1
        self.buffer = self._new_buffer()

    def close(self) -> int:
        """Write the last shard; returns how many shards there are."""
        if self.buffer.shard.documents:
            self._flush()
        return self.num_shards


@dataclass
class _ReadPosition:
    """The object and line planning last read, for the message of a failure that is not one record's."""

    spec: JobSpec
    source: str | None = None
    line: int = 0

    def at(self, source: str | None, line: int) -> None:
        self.source, self.line = source, line

    def describe(self) -> str:
        name = self.source or ("the inline input" if isinstance(self.spec.input, InlineInput) else self.spec.input.uri)
        return f"while planning {name}, after line {self.line}" if self.line else f"while opening {name}"


def _duplicate(record: InputRecord) -> RecordError:
    numeric = " (ids are compared as text: the number 7 and the string \"7\" are the same id)" if record.id.isdigit() else ""
    return RecordError(record.id, record.line, "duplicate_id", f"line {record.line}: id {record.id!r} appeared before{numeric}")


def _error_line(error: RecordError, source: str | None) -> dict:
    """A plan error as written to the error file; a prefix input's errors name their object."""
    if source is None:
        return error.to_json()
    return {**error.to_json(), "message": f"{source}: {error.message}", "source": source}


def _publish(job_id: str, plan: Plan, ctx: JobContext) -> None:
    """Cache the plan in the status store and send the first window of shard tasks."""
    ctx.status.update(job_id, total=plan.total, num_shards=plan.num_shards, expected_units=plan.num_shards + 1)
    ctx.status.count_unit(job_id, PLAN_UNIT, completed=plan.carried_records, failed=plan.plan_errors)
    if plan.num_shards == 0:
        dispatch_finalize(job_id, ctx)
        return
    fill_window(job_id, plan.num_shards, ctx)  # the rest follow as shards commit


def _records(spec: JobSpec, job_id: str,
             ctx: JobContext) -> Iterator[tuple[InputObject, JsonlObject | JsonlLineError, InputRecord | RecordError]]:
    """Each input line validated, with the object it came from."""
    fields = InputFields.of(spec)
    for source, item in input_lines(spec, job_id, ctx):
        try:
            yield source, item, to_record(item, fields.id_field, fields.text_field, fields.spans_field)
        except Exception as exc:  # noqa: BLE001 - whatever one line holds, it is that line's error alone
            yield source, item, RecordError(None, item.line, "invalid_record",
                                            f"line {item.line}: cannot be read as a record: {type(exc).__name__}: {exc}")
