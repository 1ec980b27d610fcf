"""Running one shard: under a lease, embed its records, write this attempt's objects, commit.

The commit marker (a conditional write) decides which attempt's part counts. A delivery for a
committed, leased or cancelled shard does no model work. Between two engine steps the shard
reports its progress and looks for a cancel (``step_watch.py``): a cancel that comes while it
runs commits what is done, and lists the rest of its records as ``not_processed``.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from poolq.engine import EngineResult, RequestError
from poolq.jobs.coordination.leases import Lease, LeaseKeeper
from poolq.jobs.coordination.work_units import shard_unit
from poolq.jobs.inputs.included_fields import IncludedColumns
from poolq.jobs.inputs.records import InputRecord, RecordError
from poolq.jobs.inputs.shard_input import InputFields, ShardInput, read_shard_records
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.job_ledger import ShardCommit
from poolq.jobs.observability.job_events import shard_committed, shard_started
from poolq.jobs.report.shard_stats import ShardStats
from poolq.jobs.reuse.reuse_scope import JobReuse
from poolq.jobs.reuse.shard_reuse import no_copies, publish, sort_out
from poolq.jobs.spec.engine_identity import EngineIdentity
from poolq.jobs.steps.cleanup import delete_dead_attempts
from poolq.jobs.steps.dispatch import finalize_if_ready, record_shard, release_shard
from poolq.jobs.steps.shards.budget import unrun_code
from poolq.jobs.steps.shards.engine_choice import choose_engine
from poolq.jobs.steps.shards.shard_attempt import (
    GAVE_UP_CODE,
    NOT_PROCESSED_CODE,
    AttemptOutput,
    commit_attempt,
    record_attempt_metrics,
    write_attempt,
)
from poolq.jobs.steps.shards.step_watch import ShardCancelled, StepWatch
from poolq.jobs.tasks import job_task
from poolq.jobs.tasks.finite_results import finite_results

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine

log = logging.getLogger(__name__)

__all__ = ["GAVE_UP_CODE", "NOT_PROCESSED_CODE", "ShardCancelled", "abandon_shard", "run_shard"]


def run_shard(job: JobHandle, shard: int) -> ShardCommit | None:
    """Run shard ``shard`` of ``job`` unless it is done, taken or cancelled; returns its commit.

    A task of a finished or cancelled job does one cheap check, frees its slot and nothing else: no
    listing, no finalizer of its own, no Redis key created again (a finished job's keys expire)."""
    ledger, ctx = job.ledger, job.ctx
    if ledger.manifest_written() or ledger.cancel_requested():
        release_shard(job, shard)  # a cancel's finalizer is sent by the cancel or by the last running shard
        return None
    committed = ledger.shard_commit(shard)
    if committed is not None:  # redelivered after the commit (e.g. crash before ack): count, no work
        record_shard(job, shard, committed)
        return committed
    lease = ctx.leases.acquire(job.id, shard_unit(shard), ctx.settings.reliability.lease_ttl_s)
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
        release_shard(job, shard)
        finalize_if_ready(job)
        return None
    record_shard(job, shard, commit)
    # A cancel that came while this shard ran (stopped by it, or asked after its last step): the
    # cancel saw this shard's lease and left the finalizer to the last running shard, maybe this one.
    if commit.not_processed or ledger.cancel_requested():
        finalize_if_ready(job)
    return commit


def _attempt(job: JobHandle, shard: int, lease: Lease) -> ShardCommit:
    """Produce this attempt's outputs and try to commit them; returns the commit that won."""
    started = time.monotonic()
    ctx = job.ctx
    records = _read_shard(job, shard)
    if lease.crashes_before >= ctx.settings.reliability.max_shard_crashes:
        message = (
            f"shard {shard} was abandoned after {lease.crashes_before} attempts that crashed or killed "
            "their worker; its records were not embedded"
        )
        commit = _give_up(job, shard, lease, records, message)
    else:
        shard_started(job.id, job.tenant, shard=shard, attempt=lease.attempt, documents=len(records))
        with LeaseKeeper(ctx.leases, lease, ctx.settings.reliability.lease_ttl_s):
            commit = _embed(job, shard, lease, records)
    winner = commit_attempt(job, shard, commit)
    if winner is None:  # pragma: no cover - a conditional write failed, so the marker exists
        raise RuntimeError(f"shard {shard} of job {job.id}: commit refused but no commit marker")
    if winner.attempt == commit.attempt:
        record_attempt_metrics(job, commit, time.monotonic() - started)
        shard_committed(job.id, job.tenant, shard=shard, commit=commit, seconds=time.monotonic() - started)
    if lease.crashes_before:  # earlier attempts died: whatever they wrote is not the winner's
        delete_dead_attempts(job, shard, winner.attempt)
    return winner


def _read_shard(job: JobHandle, shard: int) -> dict[str, InputRecord]:
    """The shard's records, read back from the byte ranges of the input its descriptor names."""
    section, local = job.plan.shard_location(shard)
    shard_input = ShardInput.from_bytes(job.ctx.store.get(job.layout.shard_input(section, local)))
    return read_shard_records(shard_input, InputFields.of(job.spec), job.ctx.settings.storage.s3_config())


def _embed(job: JobHandle, shard: int, lease: Lease, records: dict[str, InputRecord]) -> ShardCommit:
    """Run the shard's records through the job's task; its rows and per-record errors. A cancel
    between two engine steps keeps what is done and lists the other records as not processed."""
    engine, identity = choose_engine(job)  # the job's one engine identity (EngineMismatch: left to another)
    with job.ctx.engines.in_use(engine):  # no other model's load unloads it while the shard runs
        return _embed_on(engine, identity, job, shard, lease, records)


def _embed_on(engine: "PoolingEngine", identity: EngineIdentity, job: JobHandle, shard: int, lease: Lease,
              records: dict[str, InputRecord]) -> ShardCommit:
    spec = job.spec
    task = job_task(spec)
    rows = task.rows(engine)
    included = IncludedColumns(spec.output.include_fields, job.plan.field_types)
    rows.include_columns(included.arrow_types())
    stats = ShardStats(window=engine.window(spec.long_documents.policy()))
    output = AttemptOutput(rows, dimensions=task.dimensions(engine), engine=identity.key,
                           engine_identity=identity.model_dump(), stats=stats)
    done: set[str] = set()
    reuse = JobReuse.of(job)
    copies = no_copies(records)
    watch = StepWatch(job, shard_unit(shard))
    try:
        if reuse is not None:
            copies = sort_out(job, reuse, shard, records, on_wait=lambda: _check_cancel(job))
        # A non-finite vector becomes its record's error before reuse or the part can see it.
        fresh = finite_results(task.run(engine, copies.compute, on_step=watch), engine.config.dtype)
        for record, result, reused in copies.results(fresh, _record_id):
            done.add(record.id)
            output.characters += record.characters
            stats.observe(result, record.content_hash)
            if isinstance(result, RequestError):
                output.errors.append(RecordError(record.id, record.line, result.code, f"{record.place}: {result.message}"))
                continue
            task.append(rows, result, record, included.values(record.fields) if rows.included_types else None)
            output.count_tokens(result.processed_tokens, reused)
            output.documents += 1
    except ShardCancelled:
        code, message = unrun_code(job)  # a cancel's not_processed, or the budget's budget_exceeded
        output.errors += [RecordError(record.id, record.line, code, f"{record.place}: {message}")
                          for record in records.values() if record.id not in done]
        for record in records.values():
            if record.id not in done:
                stats.fail(code, record.content_hash)
        log.info("shard %s stopped (%s): %d records done, %d not processed (%d tokens run)", shard, code, len(done),
                 len(records) - len(done), watch.tokens)
    output.count_model_run(watch.tokens)  # billed: the windows of records a cancel stopped too
    if reuse is not None:
        publish(job, reuse, shard, lease.attempt, copies)
    return write_attempt(job, shard, lease, output)


def _check_cancel(job: JobHandle) -> None:
    if job.ledger.cancel_requested():
        raise ShardCancelled()


def _record_id(result: EngineResult) -> str:
    """The record a task's result answers: a task keys each engine request by its record's id."""
    if not isinstance(result.key, str):
        raise TypeError(f"a task's result is keyed {result.key!r}, not by a record id")
    return result.key


def abandon_shard(job: JobHandle, shard: int, reason: str) -> ShardCommit | None:
    """Commit ``shard`` as failed (its records become errors) unless it is committed or running."""
    ledger, ctx = job.ledger, job.ctx
    if ledger.shard_commit(shard) is None:
        lease = ctx.leases.acquire(job.id, shard_unit(shard), ctx.settings.reliability.lease_ttl_s)
        if lease is None:
            return None
        try:
            started = time.monotonic()
            commit = _give_up(job, shard, lease, _read_shard(job, shard), reason)
            winner = commit_attempt(job, shard, commit)
            if winner is not None and winner.attempt == commit.attempt:
                record_attempt_metrics(job, commit, time.monotonic() - started)
                shard_committed(job.id, job.tenant, shard=shard, commit=commit, seconds=time.monotonic() - started)
        finally:
            ctx.leases.release(lease)
    winner = ledger.shard_commit(shard)
    if winner is not None:
        record_shard(job, shard, winner)
        if ledger.cancel_requested():  # as at run_shard's end: the cancel left the finalizer to a running shard
            finalize_if_ready(job)
    return winner


def _give_up(job: JobHandle, shard: int, lease: Lease, records: dict[str, InputRecord], message: str) -> ShardCommit:
    """The shard cannot be embedded: its records go to the error file, with ``message``."""
    errors = [RecordError(record.id, record.line, GAVE_UP_CODE, f"{record.place}: {message}") for record in records.values()]
    stats = ShardStats()
    for record in records.values():
        stats.fail(GAVE_UP_CODE, record.content_hash)
    return write_attempt(job, shard, lease, AttemptOutput(None, errors, gave_up=True, stats=stats))
