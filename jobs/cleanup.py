"""Removing what a job's attempts left behind: losing attempts' objects, open multipart uploads."""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta, timezone

from .context import JobContext
from .ledger import JobLedger


def delete_losing_attempts(job_id: str, ctx: JobContext, keep: set[str]) -> int:
    """A finished job: delete every attempt part and error file not in ``keep``."""
    doomed = [key for attempts in _attempt_objects(ctx, job_id).values() for keys in attempts.values()
              for key in keys if key not in keep]
    for key in doomed:
        ctx.store.delete(key)
    return len(doomed)


def delete_dead_attempts(job_id: str, ctx: JobContext, ledger: JobLedger, committed: set[int]) -> int:
    """A running job: of each committed shard, delete the objects of attempts other than the winner.

    A shard's winner always wrote its error file, so a shard whose objects name one attempt holds
    only the winner's: its commit marker is read only when they name several (a crash or a lost
    race left some), and a pass over a healthy job reads none. Uncommitted shards are left alone:
    their attempts may be running.
    """
    deleted = 0
    for shard, attempts in _attempt_objects(ctx, job_id).items():
        if shard not in committed or len(attempts) < 2:
            continue
        winner = ledger.shard_commit(shard)
        for attempt, keys in attempts.items():
            if winner is not None and attempt != winner.attempt:
                for key in keys:
                    ctx.store.delete(key)
                deleted += len(keys)
    return deleted


def _attempt_objects(ctx: JobContext, job_id: str) -> dict[int, dict[str, list[str]]]:
    """shard -> attempt -> its objects: ``parts/part-00001.<attempt>.parquet`` and
    ``work/shard-00001.<attempt>.errors.jsonl`` (from two listings; nothing is read)."""
    layout = ctx.layout(job_id)
    found: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for prefix, marker in ((layout.parts_prefix, "part-"), (layout.work_prefix, "shard-")):
        for key in ctx.store.list(prefix):
            name = key.rsplit("/", 1)[1]
            if _is_attempt_object(name, marker):
                shard, attempt = name[len(marker):].split(".")[:2]
                found[int(shard)][attempt].append(key)
    return found


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
    delete_losing_attempts(job_id, ctx, keep)
    abort_stale_uploads(job_id, ctx, older_than_s=0)
    ctx.leases.forget(job_id)
    ctx.status.forget(job_id)
    ctx.store.delete(ctx.service_layout.active(job_id))
