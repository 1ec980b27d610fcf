"""One attempt of a shard: its outputs written under the attempt's own keys, then the commit
marker that names them (a conditional write: the first attempt to write it wins)."""
from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field

from poolq.jobs.coordination.leases import Lease
from poolq.jobs.coordination.worker_registry import this_worker
from poolq.jobs.coordination.worker_throughput import dtype_of
from poolq.jobs.inputs.records import RecordError
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.error_summary import ErrorSummary
from poolq.jobs.ledger.job_ledger import ShardCommit
from poolq.jobs.report.shard_stats import ShardStats
from poolq.storage import RowColumns, dump_jsonl

log = logging.getLogger(__name__)

GAVE_UP_CODE = "shard_failed"  # a shard that crashed its worker too often: every record gets it
NOT_PROCESSED_CODE = "not_processed"  # a record a cancel stopped before it was embedded
BUDGET_EXCEEDED_CODE = "budget_exceeded"  # a record the job's token budget stopped before it was embedded
UNRUN_CODES = (NOT_PROCESSED_CODE, BUDGET_EXCEEDED_CODE)  # records never embedded: counted as not_processed


@dataclass
class AttemptOutput:
    """What one attempt of a shard produced, before it is written under the attempt's keys."""

    rows: RowColumns | None  # None when nothing was embedded
    errors: list[RecordError] = field(default_factory=list)
    tokens: int = 0
    documents: int = 0
    characters: int = 0  # of the records embedded or failed
    dimensions: int | None = None
    gave_up: bool = False
    engine: str | None = None  # EnginePool.identity of the engine that embedded the rows
    engine_identity: dict | None = None  # and in full (EngineIdentity): model, revision, dtype, pooling, head, device
    stats: ShardStats | None = None  # the data report's counts (written beside the part)
    reused_documents: int = 0  # of ``documents``: rows copied from an earlier computation of their text
    reused_tokens: int = 0  # what computing those would have cost (``tokens`` counts only what was computed)

    def count_tokens(self, tokens: int, reused: bool) -> None:
        if reused:
            self.reused_documents += 1
            self.reused_tokens += tokens
        else:
            self.tokens += tokens

    def count_model_run(self, tokens_run: int) -> None:
        """The attempt's usage is every token the model ran for it (``tokens_run``: its engine steps'),
        more than its rows' when it ran records that give no row: a cancel stopped a long document
        between two windows or came before finished results had their turn in input order, or a
        result was refused (a non-finite vector). Never less than its rows' (an engine that reports
        no steps leaves only those to count)."""
        self.tokens = max(self.tokens, tokens_run)

    @property
    def not_processed(self) -> int:
        return sum(error.code in UNRUN_CODES for error in self.errors)


def write_attempt(job: JobHandle, shard: int, lease: Lease, output: AttemptOutput) -> ShardCommit:
    """Write the attempt's part (if any rows) and error file; the commit marker that would name them."""
    layout, store = job.layout, job.ctx.store
    rows = len(output.rows) if output.rows is not None else 0
    part_key = None
    if output.rows is not None and rows:
        part_key = layout.attempt_part(shard, lease.attempt)
        store.put(part_key, output.rows.to_parquet_bytes())
    errors_key = layout.attempt_errors(shard, lease.attempt)
    store.put(errors_key, dump_jsonl([error.to_json() for error in output.errors]))
    if output.stats is not None:
        store.put(layout.attempt_stats(shard, lease.attempt), json.dumps(output.stats.to_json()).encode("utf-8"))
    summary = ErrorSummary.of(output.errors)
    return ShardCommit(
        attempt=lease.attempt, part_key=part_key, errors_key=errors_key, rows=rows, documents=output.documents,
        errors=len(output.errors), tokens=output.tokens, dimensions=output.dimensions, gave_up=output.gave_up,
        engine=output.engine, error_codes=summary.codes, error_samples=list(summary.samples),
        not_processed=output.not_processed, characters=output.characters,
        reused_documents=output.reused_documents, reused_tokens=output.reused_tokens,
        engine_identity=output.engine_identity,
    )


def commit_attempt(job: JobHandle, shard: int, commit: ShardCommit) -> ShardCommit | None:
    """Commit this attempt's outputs; returns the commit that counts (this one or an earlier one).

    A refused write means the marker exists: another attempt's (drop this attempt's objects), or
    this attempt's own, when its write landed but the answer was lost and the retry found it.
    """
    if job.ledger.commit(shard, commit):
        return commit
    winner = job.ledger.shard_commit(shard)
    if winner is None or winner.attempt != commit.attempt:
        for key in (commit.part_key, commit.errors_key):
            if key is not None:
                job.ctx.store.delete(key)
    return winner


def record_attempt_metrics(job: JobHandle, commit: ShardCommit, latency_s: float) -> None:
    """Count this attempt's commit (it won) in the job metrics; the commit stands even if this fails."""
    try:
        job.ctx.metrics.shard_committed(latency_s, commit.documents, commit.tokens, Counter(commit.error_codes))
        job.ctx.throughput.record(this_worker(), job.spec.model, dtype_of(commit.engine), commit.tokens, latency_s,
                                  characters=commit.characters)
    except Exception as exc:  # noqa: BLE001 - metrics are best effort; the ledger is the record
        log.warning("shard metrics not recorded: %s: %s", type(exc).__name__, exc)
