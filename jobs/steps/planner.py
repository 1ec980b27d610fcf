"""Planning: read the input (inline, one object or a prefix), validate each record, set aside
duplicate ids and the documents an incremental job carries from its baseline, cut the rest into
shards that name byte ranges of the input, and write the plan to the ledger. Memory is bounded
by one id partition, whatever the corpus (``id_partitions.py``). Deterministic: a repeated
planning writes the same shard descriptors and carried parts."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.leases import LeaseKeeper
from poolq.jobs.inputs.input_reader import InputObject, input_lines, input_size
from poolq.jobs.inputs.records import InputRecord, RecordError, to_record
from poolq.jobs.job import InlineInput, JobSpec, JobState
from poolq.jobs.ledger.job_ledger import Plan
from poolq.jobs.steps.content_hash import content_hash
from poolq.jobs.steps.dispatch import PLAN_UNIT, dispatch_finalize, fill_window, finalize_if_ready, record_plan
from poolq.jobs.steps.id_partitions import Duplicate, IdPartitions, partitions_for
from poolq.jobs.steps.incremental import Baseline
from poolq.jobs.steps.plan_errors import PlanErrors
from poolq.jobs.steps.shard_input import InputChanged, InputFields, ShardInput
from poolq.storage import JsonlLineError, JsonlObject

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
    """Read the input twice with memory bounded by one id partition (``id_partitions.py``):
    validate and spill, decide duplicates and carried documents per partition, then cut shards
    from the rest; then carried parts, the error file and, last, ``plan.json`` (the commit point)."""
    spec = ctx.spec(job_id)
    baseline = Baseline.load(spec, ctx)
    partitions = partitions_for(input_size(spec, job_id, ctx), ctx.settings.plan_partition_bytes)
    with tempfile.TemporaryDirectory(prefix=f"poolq-plan-{job_id}-") as spill_dir:
        ids = IdPartitions(Path(spill_dir) / "ids", partitions)
        errors = PlanErrors(Path(spill_dir))
        first = _first_pass(spec, job_id, ids, errors, ctx)
        ids.flush()
        if baseline is not None and not baseline.spill_into(ids, ctx):
            baseline = None
        decisions = ids.decide(lambda dup: errors.add_duplicate(
            dup.position, dup.source, dup.line, _error_line(_duplicate(dup), first.names[dup.source])))
        num_shards = _second_pass(spec, job_id, ids, first, ctx)
        carried = baseline.write_carried(job_id, decisions, ctx) if baseline is not None else ()
        ctx.store.put_chunks(ctx.layout(job_id).plan_errors, errors.lines())
    plan = Plan(num_shards=num_shards, total=first.total, plan_errors=errors.count, carried=carried,
                carried_records=decisions.carried if carried else 0,
                engine=ctx.engine_identity(spec.model) if carried else None)  # what Baseline.load checked
    ledger = ctx.ledger(job_id)
    if not ledger.write_plan(plan):
        plan = ledger.plan() or plan  # a concurrent planner wrote the same plan first
    else:  # this planner's plan counts: its rejected records, once
        ctx.metrics.plan_errors(errors.codes)
    return plan


@dataclass
class _FirstPass:
    """What the first reading found: lines, and each input object as it was read (the valid
    records are counted by the id partitions they are spilled into)."""

    total: int = 0
    objects: list[InputObject] = field(default_factory=list)

    @property
    def names(self) -> list[str | None]:
        return [source.name for source in self.objects]

    def index_of(self, source: InputObject) -> int:
        if not self.objects or self.objects[-1] != source:
            self.objects.append(source)
        return len(self.objects) - 1


def _first_pass(spec: JobSpec, job_id: str, ids: IdPartitions, errors: PlanErrors, ctx: JobContext) -> _FirstPass:
    """Validate every line: errors aside, each valid record's (position, id, hash) spilled."""
    found = _FirstPass()
    where = _ReadPosition(spec)
    try:
        for source, _, record in _records(spec, job_id, ctx):
            where.at(source.name, record.line)
            found.total += 1
            index = found.index_of(source)
            if isinstance(record, RecordError):
                errors.add(index, record.line, _error_line(record, source.name))
                continue
            ids.add_record(record.id, content_hash(record.text, record.chunk_spans), record.line, index)
    except Exception as exc:  # not about one record (those are errors above): say where reading stopped
        exc.add_note(where.describe())
        raise
    return found


def _second_pass(spec: JobSpec, job_id: str, ids: IdPartitions, first: _FirstPass, ctx: JobContext) -> int:
    """Read the input again, in the same order, and cut shards from the records not left out."""
    shards = _ShardWriter(ctx, job_id)
    skipped = ids.skipped_positions()
    position = 0
    seen: list[InputObject] = []
    for source, item, record in _records(spec, job_id, ctx):
        if not seen or seen[-1] != source:
            seen.append(source)
        if not isinstance(record, InputRecord) or not isinstance(item, JsonlObject):
            shards.skip()
            continue
        if position in skipped:
            shards.skip()
        else:
            shards.add(record, item, source)
        position += 1
    if seen != first.objects or position != ids.valid_records:
        raise InputChanged(f"the input changed while job {job_id} was planned: "
                           f"{position} valid records where {ids.valid_records} were read before; submit the job again")
    return shards.close()


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


def _duplicate(duplicate: Duplicate) -> RecordError:
    record_id, line = duplicate.record_id, duplicate.line
    numeric = " (ids are compared as text: the number 7 and the string \"7\" are the same id)" if record_id.isdigit() else ""
    return RecordError(record_id, line, "duplicate_id", f"line {line}: id {record_id!r} appeared before{numeric}")


def _error_line(error: RecordError, source: str | None) -> dict:
    """A plan error as written to the error file; a prefix input's errors name their object."""
    if source is None:
        return error.to_json()
    return {**error.to_json(), "message": f"{source}: {error.message}", "source": source}


def _publish(job_id: str, plan: Plan, ctx: JobContext) -> None:
    """Cache the plan in the status store and send the first window of shard tasks."""
    record_plan(job_id, plan, ctx)
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
