"""Where a sink load's outcome is recorded, once per load that ends (succeeded, failed, or skipped for
a newer run of its lineage): logged, and announced to the job's webhook as ``sink.succeeded``,
``sink.failed`` or ``sink.skipped`` (docs/webhooks.md).

Nothing may raise out of it into the load: ``send_job_event`` logs what went wrong instead."""
from __future__ import annotations

import logging

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.manifest import JobManifest, ManifestSink
from poolq.jobs.spec.sink_config import SinkState
from poolq.products.webhooks.events import send_job_event

log = logging.getLogger(__name__)


def record_sink_outcome(job: JobHandle, outcome: ManifestSink) -> None:
    """A sink load of ``job`` ended with ``outcome`` (already in the manifest)."""
    log.info("job %s: sink %s %s (upserted %d, deleted %d, unchanged %d)", job.id, outcome.name, outcome.state,
             outcome.upserted, outcome.deleted, outcome.unchanged)
    _announce(job, outcome)


def announce_ended_loads(job: JobHandle, manifest: JobManifest) -> None:
    """The event of each load of ``manifest`` that ended, queued again: one whose worker died between the
    manifest and its event is queued now; one already queued keeps its event id (its delivery task may
    go out twice: delivery is at least once, and a delivered event is not sent again)."""
    for entry in manifest.sinks or []:
        if entry.state != SinkState.PENDING and entry.finished_at is not None:  # a job that did not finish: no load
            _announce(job, entry)


def _announce(job: JobHandle, outcome: ManifestSink) -> None:
    # One event per load that ends: a retried load (poolq sink retry) ends later, so it is a new event,
    # while a repeated call for the same end queues the same one (same webhook-id).
    ended = outcome.finished_at.isoformat() if outcome.finished_at else ""
    send_job_event(job, f"sink.{outcome.state}", {"job_id": job.id, **outcome.model_dump(mode="json")},
                   key=f"{outcome.name}:{ended}")
