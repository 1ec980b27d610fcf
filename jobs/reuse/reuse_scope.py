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
        """The scope planning looks the tenant's outputs up in: the dtype the job's shards will compute
        in. Until the job has one (a pin, a claim), that is the dtype most live compute workers hold its
        model in (a CPU control worker plans for bf16 GPU workers), else this worker's own. A shard
        copies only what its own scope holds (``ReuseStore.holds``): a wrong guess costs computations."""
        job = self.job
        dtype = job.chosen_dtype
        if dtype is None:
            held = job.ctx.workers.model_dtypes(job.spec.model).most_common(1)
            dtype = held[0][0] if held else job.compute_dtype
        return engine_scope(job.spec, job.ctx.engines, dtype)

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


def engine_scope(spec: JobSpec, engines: EnginePool, dtype: str | None) -> str:
    """The keys' scope of a job of ``spec`` on ``engines``' model computing in ``dtype``: the engine's identity,
    and the model's truncate_dim (its description files, never its weights)."""
    return reuse_scope(spec, engines.identity(spec.model, dtype), engines.registry.spec(spec.model).truncate_dim)


def tenant_reuse_root(job: JobHandle) -> str:
    return job.ctx.service_layout.tenant_key(job.tenant, "reuse")


def tenant_reuse_store(store: ObjectStore, output_prefix: str, tenant: str) -> ReuseStore:
    """``tenant``'s stored outputs (``poolq cache``); InvalidTenant for a name that is none."""
    return ReuseStore(store, ServiceLayout(output_prefix).tenant_key(validate_tenant(tenant), "reuse"))
