"""Where a sink load's outcome is recorded, once per load that ends (succeeded or failed).

The hook for what else should happen when a sink load ends (the ``sink`` webhook event, H5 part 3):
it receives the job and the manifest entry just written. Nothing may raise out of it into the load."""
from __future__ import annotations

import logging

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.manifest import ManifestSink

log = logging.getLogger(__name__)


def record_sink_outcome(job: JobHandle, outcome: ManifestSink) -> None:
    """A sink load of ``job`` ended with ``outcome`` (already in the manifest)."""
    log.info("job %s: sink %s %s (upserted %d, deleted %d, unchanged %d)", job.id, outcome.name, outcome.state,
             outcome.upserted, outcome.deleted, outcome.unchanged)
