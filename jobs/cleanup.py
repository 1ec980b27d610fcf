"""Removing what a job's attempts left behind: losing attempts' objects, open multipart uploads."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from .context import JobContext


def delete_losing_attempts(job_id: str, ctx: JobContext, keep: set[str], shards_done: set[int] | None) -> int:
    """Delete attempt parts and error files not in ``keep``.

    ``shards_done=None`` means the job is finished: every unkept attempt object goes. Otherwise
    only those of committed shards (a running attempt of an uncommitted shard is left alone).
    """
    layout = ctx.layout(job_id)
    deleted = 0
    for prefix, marker in ((layout.parts_prefix, "part-"), (layout.work_prefix, "shard-")):
        for key in ctx.store.list(prefix):
            name = key.rsplit("/", 1)[1]
            if key in keep or not _is_attempt_object(name, marker):
                continue
            shard = int(name[len(marker):].split(".", 1)[0])
            if shards_done is None or shard in shards_done:
                ctx.store.delete(key)
                deleted += 1
    return deleted


def _is_attempt_object(name: str, marker: str) -> bool:
    """``part-00001.<attempt>.parquet`` and ``shard-00001.<attempt>.errors.jsonl``."""
    pieces = name.split(".")
    if not name.startswith(marker):
        return False
    return (marker == "part-" and len(pieces) == 3) or (marker == "shard-" and pieces[-2:] == ["errors", "jsonl"] and len(pieces) == 4)


def abort_stale_uploads(job_id: str, ctx: JobContext, older_than_s: float) -> int:
    cutoff = datetime.now(timezone.utc) - timedelta(seconds=older_than_s)
    uploads = [u for u in ctx.store.pending_uploads(ctx.layout(job_id).root + "/") if u.initiated <= cutoff]
    for upload in uploads:
        ctx.store.abort_upload(upload)
    return len(uploads)


def clean_finished_job(job_id: str, manifest: dict, ctx: JobContext) -> None:
    """After the manifest: drop unlisted attempt objects, abort uploads, forget run-time state,
    and finally take the job off the active list."""
    ledger = ctx.ledger(job_id)
    keep = {part["key"] for part in manifest["parts"]}
    keep |= {commit.errors_key for commit in ledger.commits().values()}
    delete_losing_attempts(job_id, ctx, keep, shards_done=None)
    abort_stale_uploads(job_id, ctx, older_than_s=0)
    ctx.leases.forget(job_id)
    ctx.status.forget(job_id)
    ctx.store.delete(ctx.service_layout.active(job_id))
