"""Running one shard: embed its records, write its Parquet part and errors, record it done."""
from __future__ import annotations

import json
from dataclasses import dataclass

from engine import PoolingRequest, RequestError
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
    requests = (PoolingRequest(key=record_id, text=row["text"]) for record_id, row in records.items())
    rows = EmbeddingRows(engine.dimensions)
    errors: list[RecordError] = []
    tokens = 0
    for result in engine.run(requests, spec.long_documents.policy()):
        if isinstance(result, RequestError):
            errors.append(RecordError(result.key, records[result.key]["line"], result.code, result.message))
            continue
        rows.append(result.key, result.data, result.num_tokens, result.truncated)
        tokens += result.processed_tokens
    if len(rows):
        ctx.store.put(layout.part(shard), rows.to_parquet_bytes())
    ctx.store.put(layout.shard_errors(shard), dump_jsonl([error.to_json() for error in errors]))
    outcome = ShardOutcome(rows=len(rows), errors=len(errors), tokens=tokens, dimensions=engine.dimensions)
    _commit(job_id, shard, outcome, ctx)
    return outcome


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
