"""Running one shard: under a lease, embed its records, write this attempt's objects, commit.

The commit marker (a conditional write) decides which attempt's part counts. A delivery for a
committed, leased or cancelled shard does no model work.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass

from poolq.engine import EngineResult, RequestError
from poolq.jobs.coordination.leases import Lease, LeaseKeeper
from poolq.jobs.coordination.work_units import shard_unit
from poolq.jobs.inputs.included_fields import IncludedColumns
from poolq.jobs.inputs.records import InputRecord, RecordError
from poolq.jobs.inputs.shard_input import InputFields, ShardInput, read_shard_records
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.error_summary import ErrorSummary
from poolq.jobs.ledger.job_ledger import ShardCommit
from poolq.jobs.steps.cleanup import delete_dead_attempts
from poolq.jobs.steps.dispatch import finalize_if_ready, record_shard
from poolq.jobs.tasks import job_task
from poolq.storage import RowColumns, dump_jsonl

GAVE_UP_CODE = "shard_failed"

log = logging.getLogger(__name__)


class ShardCancelled(Exception):
    """The job was cancelled while this shard ran; nothing of this attempt is committed."""


def run_shard(job: JobHandle, shard: int) -> ShardCommit | None:
    """Run shard ``shard`` of ``job`` unless it is done, taken or cancelled; returns its commit.

    A task of a finished or cancelled job does one cheap check and nothing else: no listing, no
    finalizer of its own, no Redis key created again (a finished job's keys expire)."""
    ledger, ctx = job.ledger, job.ctx
    if ledger.manifest_written() or ledger.cancel_requested():
        return None  # a cancel's finalizer is sent by the cancel or by the last running shard
    committed = ledger.shard_commit(shard)
    if committed is not None:  # redelivered after the commit (e.g. crash before ack): count, no work
        record_shard(job, shard, committed)
        return committed
    lease = ctx.leases.acquire(job.id, shard_unit(shard), ctx.settings.lease_ttl_s)
    if lease is None:
        return None  # another attempt is running it; the reconciler steps in if that one dies
    try:
        # Look again under the lease: a finalizer that saw no lease may have finished the job
        # (after a cancel) between our first look and the lease; then nothing may be committed.
        if ledger.cancel_requested() or ledger.manifest() is not None:
            raise ShardCancelled()
        commit = _attempt(job, shard, lease)
    except ShardCancelled:
        commit = None
    finally:
        ctx.leases.release(lease)
    if commit is None:
        finalize_if_ready(job)
        return None
    record_shard(job, shard, commit)
    return commit


def _attempt(job: JobHandle, shard: int, lease: Lease) -> ShardCommit:
    """Produce this attempt's outputs and try to commit them; returns the commit that won."""
    started = time.monotonic()
    ctx = job.ctx
    records = _read_shard(job, shard)
    if lease.crashes_before >= ctx.settings.max_shard_crashes:
        message = (
            f"shard {shard} was abandoned after {lease.crashes_before} attempts that crashed or killed "
            "their worker; its records were not embedded"
        )
        commit = _give_up(job, shard, lease, records, message)
    else:
        with LeaseKeeper(ctx.leases, lease, ctx.settings.lease_ttl_s):
            commit = _embed(job, shard, lease, records)
    winner = _commit(job, shard, commit)
    if winner is None:  # pragma: no cover - a conditional write failed, so the marker exists
        raise RuntimeError(f"shard {shard} of job {job.id}: commit refused but no commit marker")
    if winner.attempt == commit.attempt:
        _record_metrics(job, commit, time.monotonic() - started)
    if lease.crashes_before:  # earlier attempts died: whatever they wrote is not the winner's
        delete_dead_attempts(job, shard, winner.attempt)
    return winner


def _commit(job: JobHandle, shard: int, commit: ShardCommit) -> ShardCommit | None:
    """Commit this attempt's outputs; returns the commit that counts (this one or an earlier one).

    A refused write means the marker exists: another attempt's (drop this attempt's objects), or
    this attempt's own, when its write landed but the answer was lost and the retry found it.
    """
    if job.ledger.commit(shard, commit):
        return commit
    winner = job.ledger.shard_commit(shard)
    if winner is None or winner.attempt != commit.attempt:
        _delete_attempt(job, commit)
    return winner


def _read_shard(job: JobHandle, shard: int) -> dict[str, InputRecord]:
    """The shard's records, read back from the byte ranges of the input its descriptor names."""
    section, local = job.plan.shard_location(shard)
    shard_input = ShardInput.from_bytes(job.ctx.store.get(job.layout.shard_input(section, local)))
    return read_shard_records(shard_input, InputFields.of(job.spec), job.ctx.settings.s3_config())


def _embed(job: JobHandle, shard: int, lease: Lease, records: dict[str, InputRecord]) -> ShardCommit:
    """Run the shard's records through the job's task; its rows and per-record errors."""
    spec = job.spec
    engine = job.ctx.engines.get(spec.model)
    task = job_task(spec)
    rows = task.rows(engine)
    included = IncludedColumns(spec.output.include_fields, job.plan.field_types)
    rows.include_columns(included.arrow_types())
    errors: list[RecordError] = []
    tokens = documents = 0
    cancel_check = _CancelCheck(job)
    progress = _ProgressReport(job, shard_unit(shard))
    for result in task.run(engine, records):
        cancel_check()
        record_id = _record_id(result)
        if isinstance(result, RequestError):
            errors.append(RecordError(record_id, records[record_id].line, result.code, result.message))
            continue
        record = records[record_id]
        task.append(rows, result, record, included.values(record.fields))
        tokens += result.processed_tokens
        documents += 1
        progress(documents, tokens)
    output = _AttemptOutput(rows, errors, tokens=tokens, documents=documents, dimensions=task.dimensions(engine),
                            engine=job.ctx.engines.identity(spec.model))
    return _write_attempt(job, shard, lease, output)


def _record_id(result: EngineResult) -> str:
    """The record a task's result answers: a task keys each engine request by its record's id."""
    if not isinstance(result.key, str):
        raise TypeError(f"a task's result is keyed {result.key!r}, not by a record id")
    return result.key


def abandon_shard(job: JobHandle, shard: int, reason: str) -> ShardCommit | None:
    """Commit ``shard`` as failed (its records become errors) unless it is committed or running."""
    ledger, ctx = job.ledger, job.ctx
    if ledger.shard_commit(shard) is None:
        lease = ctx.leases.acquire(job.id, shard_unit(shard), ctx.settings.lease_ttl_s)
        if lease is None:
            return None
        try:
            started = time.monotonic()
            commit = _give_up(job, shard, lease, _read_shard(job, shard), reason)
            winner = _commit(job, shard, commit)
            if winner is not None and winner.attempt == commit.attempt:
                _record_metrics(job, commit, time.monotonic() - started)
        finally:
            ctx.leases.release(lease)
    winner = ledger.shard_commit(shard)
    if winner is not None:
        record_shard(job, shard, winner)
    return winner


def _give_up(job: JobHandle, shard: int, lease: Lease, records: dict[str, InputRecord], message: str) -> ShardCommit:
    """The shard cannot be embedded: its records go to the error file, with ``message``."""
    errors = [RecordError(record.id, record.line, GAVE_UP_CODE, message) for record in records.values()]
    return _write_attempt(job, shard, lease, _AttemptOutput(None, errors, gave_up=True))


@dataclass(frozen=True)
class _AttemptOutput:
    """What one attempt of a shard produced, before it is written under the attempt's keys."""

    rows: RowColumns | None  # None when nothing was embedded
    errors: list[RecordError]
    tokens: int = 0
    documents: int = 0
    dimensions: int | None = None
    gave_up: bool = False
    engine: str | None = None  # JobContext.engine_identity of the engine that embedded the rows


def _write_attempt(job: JobHandle, shard: int, lease: Lease, output: _AttemptOutput) -> ShardCommit:
    """Write the attempt's part (if any rows) and error file; the commit marker that would name them."""
    layout, store = job.layout, job.ctx.store
    rows = len(output.rows) if output.rows is not None else 0
    part_key = None
    if output.rows is not None and rows:
        part_key = layout.attempt_part(shard, lease.attempt)
        store.put(part_key, output.rows.to_parquet_bytes())
    errors_key = layout.attempt_errors(shard, lease.attempt)
    store.put(errors_key, dump_jsonl([error.to_json() for error in output.errors]))
    summary = ErrorSummary.of(output.errors)
    return ShardCommit(
        attempt=lease.attempt, part_key=part_key, errors_key=errors_key, rows=rows, documents=output.documents,
        errors=len(output.errors), tokens=output.tokens, dimensions=output.dimensions, gave_up=output.gave_up,
        engine=output.engine, error_codes=summary.codes, error_samples=list(summary.samples),
    )


def _record_metrics(job: JobHandle, commit: ShardCommit, latency_s: float) -> None:
    """Count this attempt's commit (it won) in the job metrics; the commit stands even if this fails."""
    try:
        job.ctx.metrics.shard_committed(latency_s, commit.documents, commit.tokens, Counter(commit.error_codes))
    except Exception as exc:  # noqa: BLE001 - metrics are best effort; the ledger is the record
        log.warning("shard metrics not recorded: %s: %s", type(exc).__name__, exc)


def _delete_attempt(job: JobHandle, commit: ShardCommit) -> None:
    for key in (commit.part_key, commit.errors_key):
        if key is not None:
            job.ctx.store.delete(key)


class _ProgressReport:
    """Reports the shard's documents and tokens so far at most every ``progress_interval_s``, so
    progress moves between commits; best effort (the commit's counts are the record)."""

    def __init__(self, job: JobHandle, unit: str) -> None:
        self.job, self.unit = job, unit
        self.interval_s = job.ctx.settings.progress_interval_s
        self.next_report = time.monotonic() + self.interval_s

    def __call__(self, documents: int, tokens: int) -> None:
        now = time.monotonic()
        if now < self.next_report:
            return
        self.next_report = now + self.interval_s
        try:
            self.job.ctx.status.note_progress(self.job.id, self.unit, documents, tokens)
        except Exception as exc:  # noqa: BLE001 - a lost progress report costs nothing but a still bar
            log.debug("progress of %s/%s not reported: %s", self.job.id, self.unit, exc)


class _CancelCheck:
    """Looks for the job's cancel request at most every ``cancel_check_interval_s`` (between batches)."""

    def __init__(self, job: JobHandle) -> None:
        self.ledger = job.ledger
        self.interval_s = job.ctx.settings.cancel_check_interval_s
        self.next_check = time.monotonic() + self.interval_s

    def __call__(self) -> None:
        now = time.monotonic()
        if now < self.next_check:
            return
        self.next_check = now + self.interval_s
        if self.ledger.cancel_requested():
            raise ShardCancelled()
