"""Removing what a job's attempts left behind: losing attempts' objects, open multipart uploads."""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta, timezone

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.layout import ShardObjectKind, parse_shard_object
from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.ledger.planning_ledger import PlanningLedger
from poolq.jobs.ledger.planning_objects import SKIPS_NAME, SPILL_NAME, PlanningObjects


def delete_losing_attempts(job: JobHandle, keep: set[str]) -> int:
    """A finished job: delete every attempt part and error file not in ``keep``."""
    doomed = [key for attempts in _attempt_objects(job).values() for keys in attempts.values()
              for key in keys if key not in keep]
    for key in doomed:
        job.ctx.store.delete(key)
    return len(doomed)


def delete_dead_attempts(job: JobHandle, shard: int, winner: str) -> int:
    """A committed shard: delete the objects of its attempts other than ``winner`` (attempts that
    died before committing). Two listings narrowed to this shard's own keys: the cost is this
    shard's attempts, never the job's size."""
    deleted = 0
    layout = job.layout
    for attempt, keys in _attempt_objects(job, layout.shard_key_prefixes(shard)).get(shard, {}).items():
        if attempt != winner:
            for key in keys:
                job.ctx.store.delete(key)
            deleted += len(keys)
    return deleted


def _attempt_objects(job: JobHandle,
                     prefixes: tuple[str, ...] | None = None) -> dict[int, dict[str, list[str]]]:
    """shard -> attempt -> its objects: ``parts/part-00001.<attempt>.parquet`` and
    ``work/shard-00001.<attempt>.errors.jsonl``, under ``prefixes`` (default: every shard's;
    listings only, nothing is read)."""
    layout = job.layout
    found: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for prefix in prefixes or (layout.parts_prefix, layout.work_prefix):
        for key in job.ctx.store.list(prefix):
            shard_object = parse_shard_object(key)
            if shard_object is not None and shard_object.kind in _ATTEMPT_KINDS and shard_object.attempt:
                found[shard_object.shard][shard_object.attempt].append(key)
    return found


_ATTEMPT_KINDS = (ShardObjectKind.ATTEMPT_PART, ShardObjectKind.ATTEMPT_ERRORS, ShardObjectKind.ATTEMPT_STATS)


def abort_stale_uploads(job: JobHandle, older_than_s: float) -> int:
    cutoff = datetime.now(timezone.utc) - timedelta(seconds=older_than_s)
    uploads = [u for u in job.ctx.store.pending_uploads(job.layout.root + "/") if u.initiated <= cutoff]
    for upload in uploads:
        job.ctx.store.abort_upload(upload)
    return len(uploads)


def delete_planning_spills(job: JobHandle) -> int:
    """A finished job: delete its sections' id spills and skip arrays (planning's bulk, ~40 bytes
    per document). The stage records, shard descriptors and sections stay: they are small, and
    they say how the job was planned."""
    sections = PlanningLedger(job.ctx.store, job.layout).sections() or []
    objects = PlanningObjects(job.ctx.store, job.layout)
    for index in range(len(sections)):
        for name in (SPILL_NAME, SKIPS_NAME):
            objects.delete(index, name)
    return 2 * len(sections)


def clean_finished_job(job: JobHandle, manifest: JobManifest) -> None:
    """After the manifest: drop unlisted attempt objects, abort uploads, forget run-time state,
    and finally take the job off the active list."""
    ctx = job.ctx
    ledger = job.ledger
    keep = {part.key for part in manifest.parts}
    keep |= {commit.errors_key for commit in ledger.commits().values()}
    delete_losing_attempts(job, keep)
    delete_planning_spills(job)
    abort_stale_uploads(job, older_than_s=0)
    ctx.leases.forget(job.id)
    ctx.status.forget(job.id)
    ctx.status.expire(job.id, ctx.settings.reliability.finished_job_ttl_s)  # the ledger keeps the truth
    ctx.fair.forget(job.id)  # its shards never queued free their slots
    ctx.store.delete(ctx.service_layout.active(job.id))
