"""The estimate's reuse probe for a job with ``reuse: "tenant"``: its sample's content hashes looked
up in the tenant's reuse store (jobs/reuse/), one index partition per read, never one per record.

The key scope is the engine identity the job would have here (its pinned dtype, else this host's
``auto``), as the workers make it when they share this host's device kind; in a fleet whose workers
differ (GPUs behind a CPU API), what they stored is under their identity and the probe finds none
of it: the estimate then counts those tokens as computed, never the other way round.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from poolq.jobs.context import JobContext
from poolq.jobs.reuse.reuse_scope import UNREUSABLE_TASKS, engine_scope, tenant_reuse_store
from poolq.jobs.reuse.reuse_store import partition_of
from poolq.jobs.spec.job_spec import JobSpec
from poolq.products.estimate.reuse_probe import NoReuseProbe, ReuseProbe


class TenantReuseProbe:
    """What the tenant's store already holds for this job's options and engine."""

    name = "tenant"

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx

    def reusable(self, spec: JobSpec, tenant: str, content_hashes: Sequence[str]) -> list[bool]:
        engines = self.ctx.engines
        scope = engine_scope(spec, engines, engines.dtype_for(spec.compute_dtype))
        store = tenant_reuse_store(self.ctx.store, self.ctx.settings.storage.output_prefix, tenant)
        by_partition: dict[str, list[str]] = defaultdict(list)
        for content_hash in content_hashes:
            by_partition[partition_of(content_hash)].append(content_hash)
        found: set[str] = set()
        for partition, members in by_partition.items():
            stored = store.lookup(scope, partition)
            found.update(member for member in members if member in stored)
        return [content_hash in found for content_hash in content_hashes]


def reuse_probe_for(ctx: JobContext, spec: JobSpec) -> ReuseProbe:
    """The tenant's store for a job that opted in to reuse across its jobs; nothing otherwise."""
    if spec.reuse != "tenant" or spec.task_label in UNREUSABLE_TASKS or not ctx.settings.reuse.reuse_enabled:
        return NoReuseProbe()
    return TenantReuseProbe(ctx)
