"""Sink loads not ended yet, listed in the store so that none stays ``pending`` for good.

A job leaves the active list once its load is queued, so the reconciler's pass over active jobs
never sees it again. Whoever queues a load therefore writes a marker first
(``_sink_loads/<job>``, with when it was sent), and the load deletes it once none of the job's
sinks is pending. The reconciler sends the load again of every marked job whose sink is still
pending, whose lease is not held, and that was neither sent nor started within the last lease:
a load whose worker was killed and whose every message was spent (a redelivery that found the
dead attempt's lease and came back, then was lost too) is loaded again within a lease and a pass.
"""
from __future__ import annotations

import json
import logging
import time

from poolq.jobs.context import JobContext
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.spec.job_ids import JobNotFound
from poolq.jobs.spec.sink_config import SinkState
from poolq.products.sinks.sink_outcome import announce_ended_loads
from poolq.storage import ObjectNotFoundError, join_key

log = logging.getLogger(__name__)

SINK_UNIT = "sinks"  # the lease one sink step of a job holds


def has_pending(manifest: JobManifest | None) -> bool:
    return manifest is not None and any(entry.state == SinkState.PENDING for entry in manifest.sinks or [])


def _prefix(ctx: JobContext) -> str:
    return join_key(ctx.service_layout.prefix, "_sink_loads") + "/"


def note_sent(job: JobHandle, now: float | None = None) -> None:
    """The job's load is about to be sent (queued, re-sent, or coming back after a lease)."""
    sent_at = time.time() if now is None else now
    job.ctx.store.put(_prefix(job.ctx) + job.id, json.dumps({"sent_at": sent_at}).encode())


def settle(job: JobHandle) -> None:
    """Forget the job's marker if none of its sinks is pending (read again: a retry may have just
    marked one pending, after the caller's own read)."""
    if not has_pending(job.ledger.manifest()):
        job.ctx.store.delete(_prefix(job.ctx) + job.id)


def settle_left_over(job: JobHandle, manifest: JobManifest) -> None:
    """No load of ``manifest`` is pending, yet its marker may still be there: the last load's worker
    died after writing its outcome, maybe before queuing its event. Each ended load's event is queued
    (again: delivery is at least once, one event id per load's end), then the marker is forgotten."""
    if job.ctx.store.exists(_prefix(job.ctx) + job.id):
        announce_ended_loads(job, manifest)
        settle(job)


def resend_stuck_loads(ctx: JobContext, now: float) -> list[str]:
    """Send again each marked load left pending past its lease; ``<job>/sinks`` of each sent."""
    resent = []
    for key in ctx.store.list(_prefix(ctx)):
        job_id = key[len(_prefix(ctx)):]
        try:
            if _resend_if_stuck(ctx, job_id, key, now):
                resent.append(f"{job_id}/{SINK_UNIT}")
        except Exception:  # noqa: BLE001 - one job must not stop the pass over the others
            log.exception("re-sending the sink load of job %s failed", job_id)
    return resent


def _resend_if_stuck(ctx: JobContext, job_id: str, key: str, now: float) -> bool:
    try:
        job = JobHandle.bind(ctx, job_id)
        sent_at = float(json.loads(ctx.store.get(key))["sent_at"])
    except (JobNotFound, ObjectNotFoundError):
        ctx.store.delete(key)
        return False
    manifest = job.ledger.manifest()
    if manifest is None:
        settle(job)
        return False
    if not has_pending(manifest):
        settle_left_over(job, manifest)
        return False
    if ctx.leases.holder(job_id, SINK_UNIT) is not None:
        return False  # a load runs (or a killed one's lease has not lapsed: its task comes back after it)
    started_at = ctx.leases.last_started(job_id).get(SINK_UNIT, 0.0)
    if now - max(sent_at, started_at) <= ctx.settings.reliability.lease_ttl_s:
        return False  # sent or started within a lease: that task may still be on its way
    note_sent(job, now)
    ctx.enqueuer.load_sinks(job_id)
    log.info("job %s: sink load pending past its lease; sent again", job_id)
    return True
