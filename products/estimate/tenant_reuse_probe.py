"""The estimate's reuse probe for a job with ``reuse: "tenant"``: its sample's content hashes looked
up in the tenant's reuse store (jobs/reuse/), one index partition per read, never one per record.

The key scope is the one planning would look up (``fleet_scope``): the engine most live compute
workers hold the model in (of the job's pinned dtype, if any), else this host's own. Where the
guess is wrong, the probe finds nothing and the estimate counts those tokens as computed, never
the other way round.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from poolq.jobs.context import JobContext
from poolq.jobs.reuse.reuse_scope import UNREUSABLE_TASKS, fleet_scope, tenant_reuse_store
from poolq.jobs.reuse.reuse_store import partition_of
from poolq.jobs.spec.job_spec import JobSpec
from poolq.products.estimate.reuse_probe import NoReuseProbe, ReuseProbe


class TenantReuseProbe:
    """What the tenant's store already holds for this job's options and engine."""

    name = "tenant"

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx

    def reusable(self, spec: JobSpec, tenant: str, content_hashes: Sequence[str]) -> list[bool]:
        scope = fleet_scope(self.ctx, spec)
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
