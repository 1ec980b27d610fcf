"""A job's reuse, bound once: whether it applies, its key scope, its stores' places."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.layout import ServiceLayout
from poolq.jobs.reuse.reuse_key import reuse_scope
from poolq.jobs.reuse.reuse_store import ReuseStore
from poolq.jobs.tenancy.api_keys import validate_tenant
from poolq.storage import ObjectStore, join_key

if TYPE_CHECKING:
    from poolq.jobs.context import JobContext
    from poolq.jobs.engine_pool import EnginePool
    from poolq.jobs.spec.job_spec import JobSpec

# A score's rank depends on the other pairs of its query, not on the pair alone: never reused.
UNREUSABLE_TASKS = frozenset({"score"})


@dataclass(frozen=True)
class JobReuse:
    """What reuse means for one job: ``tenant`` is its tenant's store when the job opted in."""

    job: JobHandle
    tenant: ReuseStore | None
    job_root: str  # the job's own reuse objects: texts one shard computes for another's repeats

    @cached_property
    def scope(self) -> str:
        """The keys' scope: needs the engine's identity (the model's files), so only where it is used.
        Its dtype is the job's (``JobHandle.compute_dtype``): on a shard, the one its engine computes in."""
        return engine_scope(self.job.spec, self.job.ctx.engines, self.job.compute_dtype)

    @cached_property
    def lookup_scope(self) -> str:
        """The scope planning looks the tenant's outputs up in: the engine the job's shards will compute
        with, its first shard's claim if there is one, else the fleet's (``fleet_scope``). A shard copies
        only what its own scope holds (``ReuseStore.holds``): a wrong guess costs computations, never rows."""
        job = self.job
        claimed = job.claimed_engine()
        if claimed is not None:
            return engine_scope(job.spec, job.ctx.engines, claimed.dtype, claimed.device)
        return fleet_scope(job.ctx, job.spec)

    @classmethod
    def of(cls, job: JobHandle) -> "JobReuse | None":
        """None for a job whose outputs are never reused (see ``UNREUSABLE_TASKS``)."""
        spec = job.spec
        if spec.task_label in UNREUSABLE_TASKS or not job.ctx.settings.reuse.reuse_enabled:
            return None
        ctx = job.ctx
        tenant = ReuseStore(ctx.store, tenant_reuse_root(job)) if spec.reuse == "tenant" else None
        return cls(job, tenant, join_key(job.layout.root, "reuse"))

    def shard_object(self, section: int, shard: int, attempt: str) -> str:
        return join_key(self.job_root, f"section-{section:05d}", f"shard-{shard:05d}-{attempt}.parquet")


def engine_scope(spec: JobSpec, engines: EnginePool, dtype: str | None, device: str | None = None) -> str:
    """The keys' scope of a job of ``spec`` on ``engines``' model computing in ``dtype`` on ``device`` (a
    kind; None: this process's): the engine's identity, and the model's truncate_dim (its description
    files, never its weights)."""
    identity = engines.engine_identity(spec.model, dtype)
    return reuse_scope(spec, identity.key, engines.registry.spec(spec.model).truncate_dim, device or identity.device)


def fleet_scope(ctx: JobContext, spec: JobSpec) -> str:
    """The scope a job of ``spec`` is likely computed in by the fleet: the (dtype, device) most live
    compute workers hold its model in, of its pinned dtype if it pins one (a CPU control worker or API
    plans for bf16 GPU workers), else this process's own engine."""
    pinned = None if spec.compute_dtype == "auto" else spec.compute_dtype
    held = [engine for engine, _ in ctx.workers.model_engines(spec.model).most_common()
            if pinned is None or engine[0] == pinned]
    dtype, device = held[0] if held else (ctx.engines.dtype_for(spec.compute_dtype), None)
    return engine_scope(spec, ctx.engines, dtype, device)


def tenant_reuse_root(job: JobHandle) -> str:
    return job.ctx.service_layout.tenant_key(job.tenant, "reuse")


def tenant_reuse_store(store: ObjectStore, output_prefix: str, tenant: str) -> ReuseStore:
    """``tenant``'s stored outputs (``poolq cache``); InvalidTenant for a name that is none."""
    return ReuseStore(store, ServiceLayout(output_prefix).tenant_key(validate_tenant(tenant), "reuse"))
