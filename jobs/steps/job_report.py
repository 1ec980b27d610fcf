"""The finalizer's data report: every committed shard's counts (written beside its part) added
up, with planning's failures and the manifest's reuse counts (``reuse``, where reuse ran)."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.job_ledger import Plan, ShardCommit
from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.report.data_report import DataReport
from poolq.jobs.report.shard_stats import ShardStats
from poolq.storage import ObjectNotFoundError

_READERS = 16  # stats objects read at once (S3 GETs are latency-bound)


def job_report(job: JobHandle, plan: Plan | None, commits: dict[int, ShardCommit], manifest: JobManifest) -> DataReport:
    """The report of ``job``: a commit without stats (written before reports existed) adds nothing."""
    keys = [job.layout.attempt_stats(shard, commit.attempt) for shard, commit in sorted(commits.items())]
    with ThreadPoolExecutor(max_workers=_READERS) as pool:
        found = [stats for stats in pool.map(lambda key: _read(job, key), keys) if stats is not None]
    total = ShardStats()
    for stats in found:
        total = total.merge(stats)
    return total.report(plan.error_codes if plan else None, _reused_documents(manifest))


def _read(job: JobHandle, key: str) -> ShardStats | None:
    try:
        return ShardStats.from_json(json.loads(job.ctx.store.get(key)))
    except ObjectNotFoundError:
        return None


def _reused_documents(manifest: JobManifest) -> int | None:
    """``reuse.reused_documents`` of the manifest, if reuse wrote it (a block or a plain dict)."""
    reuse = getattr(manifest, "reuse", None)
    if isinstance(reuse, dict):
        value = reuse.get("reused_documents")
    else:
        value = getattr(reuse, "reused_documents", None)
    return value if isinstance(value, int) else None
