"""Finalizing: gather shard outcomes, write the error file, then the manifest, last."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from storage import ObjectExistsError, embedding_schema

from .context import JobContext, write_json
from .job import JobState

MANIFEST_VERSION = 1


def finalize_job(job_id: str, ctx: JobContext) -> JobState:
    """Write ``errors.jsonl`` and ``manifest.json``; the job is finished once the manifest exists."""
    layout = ctx.layout(job_id)
    spec = ctx.spec(job_id)
    num_shards = int(ctx.status.field(job_id, "num_shards") or 0)
    outcomes = [json.loads(ctx.store.get(layout.shard_done(shard))) for shard in range(num_shards)]
    error_lines = _gather_errors(ctx, job_id, num_shards)
    ctx.store.put(layout.errors, b"".join(error_lines))
    rows = sum(outcome["rows"] for outcome in outcomes)
    tokens = sum(outcome["tokens"] for outcome in outcomes)
    state = _final_state(rows, len(error_lines))
    finished_at = datetime.now(timezone.utc)
    manifest = {
        "version": MANIFEST_VERSION,
        "job_id": job_id,
        "status": state.value,
        "model": spec.model,
        "task": spec.task,
        "options": spec.model_dump(mode="json", exclude={"input"}),
        "columns": embedding_schema(1, spec.long_documents.mode.chunk_rows).names,
        "dimensions": max((outcome["dimensions"] for outcome in outcomes), default=None),
        "counts": {"total": rows + len(error_lines), "completed": rows, "failed": len(error_lines)},
        "usage": {"tokens": tokens},
        "parts": [
            {"key": layout.part(shard), "uri": ctx.store.uri(layout.part(shard)), "rows": outcome["rows"]}
            for shard, outcome in enumerate(outcomes)
            if outcome["rows"]
        ],
        "errors": {"key": layout.errors, "uri": ctx.store.uri(layout.errors), "count": len(error_lines)},
        "finished_at": finished_at.isoformat(),
    }
    try:
        write_json(ctx.store, layout.manifest, manifest, if_absent=True)
    except ObjectExistsError:
        pass  # a duplicate finalizer: the first manifest stands
    ctx.status.update(
        job_id, status=state, finished_at=finished_at, manifest_uri=ctx.store.uri(layout.manifest)
    )
    return state


def _gather_errors(ctx: JobContext, job_id: str, num_shards: int) -> list[bytes]:
    layout = ctx.layout(job_id)
    keys = [layout.plan_errors, *(layout.shard_errors(shard) for shard in range(num_shards))]
    lines: list[bytes] = []
    for key in keys:
        with ctx.store.open(key) as stream:
            lines.extend(raw if raw.endswith(b"\n") else raw + b"\n" for raw in stream if raw.strip())
    return lines


def _final_state(rows: int, errors: int) -> JobState:
    if errors == 0:
        return JobState.SUCCEEDED
    return JobState.PARTIALLY_SUCCEEDED if rows else JobState.FAILED
