"""A job's manifest ``sinks`` entries before and after a load: the first ones the finalizer writes
(``pending``, or ``skipped`` for a job with no rows to load), queueing the load of pending ones, and
``poolq sink retry JOB`` marking failed (or stuck pending) loads pending again. Nothing is recomputed
on a retry: the load reads the parts already in the bucket (products/sinks/sink_load.py). Each change is
written to the manifest, then shown on the cached status. No store's driver is imported here."""
from __future__ import annotations

import logging

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.manifest import JobManifest, ManifestSink
from poolq.jobs.spec.sink_config import SinkState, sink_outcomes_json
from poolq.products.sinks.pending_loads import has_pending, note_sent

log = logging.getLogger(__name__)


def send_pending_loads(job: JobHandle, manifest: JobManifest) -> None:
    """Queue the load of the job's pending sinks, if it has any (marked first, for the reconciler:
    ``pending_loads.py``). Sent again on every call while a load is pending: a load already running
    holds the lease (the extra task comes back after it), and one that ended left nothing pending,
    so an extra task does nothing."""
    if has_pending(manifest):
        note_sent(job)
        job.ctx.enqueuer.load_sinks(job.id)


def retry_sinks(job: JobHandle) -> list[str]:
    """Mark the job's failed sinks pending again and queue the load (and a pending one's again, in
    case its task was lost: a load already running holds the lease, so the extra one comes back
    after it and finds nothing pending); the names retried."""
    manifest = job.ledger.manifest()
    retryable = (SinkState.FAILED, SinkState.PENDING)
    failed = [entry.name for entry in (manifest.sinks or []) if entry.state in retryable] if manifest else []
    if manifest is None or not failed:
        return []
    sinks = [ManifestSink(name=entry.name, state=SinkState.PENDING) if entry.name in failed else entry
             for entry in manifest.sinks or []]
    rewrite_sinks(job, sinks)
    note_sent(job)
    job.ctx.enqueuer.load_sinks(job.id)
    return failed


def rewrite_sinks(job: JobHandle, sinks: list[ManifestSink]) -> JobManifest | None:
    """Write the job's ``sinks`` into its manifest (None if it has none yet), then onto its cached
    status: best effort, and only while the status is cached (one that expired is rebuilt from the
    manifest, so none is made here)."""
    updated = job.ledger.rewrite_manifest_sinks(sinks)
    try:
        if updated is not None and job.ctx.status.field(job.id, "status") is not None:
            job.ctx.status.update(job.id, sinks=sink_outcomes_json(sinks))
    except Exception:  # noqa: BLE001 - the cache is best effort; the manifest has the outcome
        log.warning("job %s: sink states not cached", job.id, exc_info=True)
    return updated
