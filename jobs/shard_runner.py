"""Running one shard: embed its records, write its Parquet part and errors, record it done."""
from __future__ import annotations

import json
from dataclasses import dataclass

from engine import PoolingOutput, PoolingRequest, RequestError
from storage import EmbeddingRows, ObjectExistsError, dump_jsonl, read_jsonl

from .context import JobContext, write_json
from .records import RecordError


@dataclass(frozen=True)
class ShardOutcome:
    rows: int
    errors: int
    tokens: int
    dimensions: int


def run_shard(job_id: str, shard: int, ctx: JobContext) -> ShardOutcome:
    """Embed shard ``shard`` of ``job_id``; enqueue the finalizer when it is the last one done."""
    layout = ctx.layout(job_id)
    done_key = layout.shard_done(shard)
    if ctx.store.exists(done_key):  # a redelivered message for a finished shard: nothing to do
        return ShardOutcome(**json.loads(ctx.store.get(done_key)))
    spec = ctx.spec(job_id)
    engine = ctx.engine(spec.model)
    records = {}
    with ctx.store.open(layout.shard_input(shard)) as stream:
        for item in read_jsonl(stream):
            records[item.value["id"]] = item.value
    requests = (
        PoolingRequest(key=record_id, text=row["text"], chunk_spans=_spans(row.get("chunk_spans")))
        for record_id, row in records.items()
    )
    policy = spec.long_documents.policy()
    rows = EmbeddingRows(engine.dimensions, with_chunks=policy.mode.chunk_rows)
    errors: list[RecordError] = []
    tokens = 0
    for result in engine.run(requests, policy):
        if isinstance(result, RequestError):
            errors.append(RecordError(result.key, records[result.key]["line"], result.code, result.message))
            continue
        _append_rows(rows, result)
        tokens += result.processed_tokens
    if len(rows):
        ctx.store.put(layout.part(shard), rows.to_parquet_bytes())
    ctx.store.put(layout.shard_errors(shard), dump_jsonl([error.to_json() for error in errors]))
    outcome = ShardOutcome(rows=len(rows), errors=len(errors), tokens=tokens, dimensions=engine.dimensions)
    _commit(job_id, shard, outcome, ctx)
    return outcome


def _spans(raw: list[list[int]] | None) -> tuple[tuple[int, int], ...] | None:
    return None if raw is None else tuple((start, end) for start, end in raw)


def _append_rows(rows: EmbeddingRows, result: PoolingOutput) -> None:
    """One row per document, or one per chunk in the chunk modes."""
    if result.chunks is None:
        rows.append(result.key, result.data, result.num_tokens, result.truncated)
        return
    for vector, chunk in zip(result.data, result.chunks):
        values = (chunk.chunk_index, chunk.token_start, chunk.token_end, chunk.char_start, chunk.char_end)
        rows.append(result.key, vector, result.num_tokens, result.truncated, values)


def _commit(job_id: str, shard: int, outcome: ShardOutcome, ctx: JobContext) -> None:
    """Record the shard as done exactly once; the attempt that wins counts its progress."""
    try:
        write_json(ctx.store, ctx.layout(job_id).shard_done(shard), outcome.__dict__, if_absent=True)
    except ObjectExistsError:
        return  # another attempt committed first and counted itself
    ctx.status.add_progress(job_id, completed=outcome.rows, failed=outcome.errors, tokens=outcome.tokens)
    shards_done = ctx.status.add(job_id, "shards_done", 1)
    if shards_done == int(ctx.status.field(job_id, "num_shards") or 0):
        ctx.enqueuer.finalize(job_id)
