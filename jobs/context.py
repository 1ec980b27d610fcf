"""A process's wiring: its settings and every store a job step talks to, built once from Settings."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from poolq.engine import ModelRegistry
from poolq.engine.loading.hub import HubAccess
from poolq.jobs.coordination.enqueuer import Enqueuer
from poolq.jobs.coordination.fair_share import FairShare
from poolq.jobs.coordination.leases import InMemoryLeaseStore, LeaseStore, RedisLeaseStore
from poolq.jobs.coordination.memory_fair_share import InMemoryFairShare
from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.coordination.redis_fair_share import RedisFairShare
from poolq.jobs.coordination.redis_status_store import RedisJobStatusStore
from poolq.jobs.coordination.status_store import JobStatusStore
from poolq.jobs.coordination.tenant_day_usage import InMemoryTenantDayUsage, RedisTenantDayUsage, TenantDayUsage
from poolq.jobs.coordination.worker_registry import InMemoryWorkerRegistry, RedisWorkerRegistry, WorkerRegistry
from poolq.jobs.coordination.worker_throughput import InMemoryThroughputBoard, RedisThroughputBoard, ThroughputBoard
from poolq.jobs.engine_pool import EnginePool
from poolq.jobs.job_hooks import JobHooks, NoProducts
from poolq.jobs.ledger.job_ledger import Plan
from poolq.jobs.ledger.layout import ServiceLayout
from poolq.jobs.observability.job_metrics import InMemoryJobMetrics, JobMetrics, RedisJobMetrics
from poolq.jobs.settings import Role, Settings
from poolq.jobs.spec.job_ids import is_job_id
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.written_once_cache import WrittenOnceCache
from poolq.storage import ObjectNotFoundError, ObjectStore

if TYPE_CHECKING:
    import redis

_TENANTS_KEPT = 1 << 16  # job id -> tenant is tiny, and the API looks it up on every request


@dataclass
class JobContext:
    settings: Settings
    store: ObjectStore  # the ledger: every job's records, inputs and outputs
    status: JobStatusStore  # the status cache, counters and dispatch times
    leases: LeaseStore
    enqueuer: Enqueuer
    registry: ModelRegistry
    engines: EnginePool
    metrics: JobMetrics = field(default_factory=InMemoryJobMetrics)  # work done, for /metrics
    fair: FairShare = field(default_factory=InMemoryFairShare)  # which job's shard runs next; shards in flight
    workers: WorkerRegistry = field(default_factory=InMemoryWorkerRegistry)  # compute workers alive
    throughput: ThroughputBoard = field(default_factory=InMemoryThroughputBoard)  # their measured tokens/s
    hooks: JobHooks = field(default_factory=NoProducts)  # what the products add to submit and finalize
    day_usage: TenantDayUsage = field(default_factory=InMemoryTenantDayUsage)  # tokens per tenant per UTC day
    # Written once, never changed: read once per process (JobHandle reads specs and plans through them).
    tenants: WrittenOnceCache[str] = field(default_factory=lambda: WrittenOnceCache(_TENANTS_KEPT), repr=False)
    specs: WrittenOnceCache[JobSpec] = field(default_factory=WrittenOnceCache, repr=False)
    plans: WrittenOnceCache[Plan] = field(default_factory=WrittenOnceCache, repr=False)

    @property
    def service_layout(self) -> ServiceLayout:
        return ServiceLayout(self.settings.storage.output_prefix)

    def register_job(self, job_id: str, tenant: str) -> None:
        """Record the job's tenant (first write of a submission; a repeat keeps the first)."""
        record = json.dumps({"tenant": tenant}).encode()
        self.store.put_once(self.service_layout.job_index(job_id), record)

    def tenant_of(self, job_id: str) -> str | None:
        """The tenant owning ``job_id``, or None if there is no such job: this process's cache, else
        the job's cached status (polling a job needs no store), else the job index in the store."""
        if not is_job_id(job_id):
            return None
        try:
            return self.tenants.get(job_id, lambda: self.status.field(job_id, "tenant") or self._indexed_tenant(job_id))
        except ObjectNotFoundError:
            return None

    def _indexed_tenant(self, job_id: str) -> str:
        return json.loads(self.store.get(self.service_layout.job_index(job_id)))["tenant"]


def build_context(settings: Settings, enqueuer: Enqueuer, redis_client: "redis.Redis | None" = None, *,
                  hooks: JobHooks, loads_models: bool = True, role: Role = "worker") -> JobContext:
    """The one way a process gets its context. With ``redis_client`` (the API, workers, beat) the
    status cache, leases and counters are shared in Redis; without it (a job run in this process)
    they live in memory. Either way the store is the ledger. ``loads_models=False``: a process that
    must never load a model (a control worker). ``role``: whose deadlines the store's calls have
    (``Settings.storage.s3_config``). ``hooks``: the products' (``poolq.products.job_hooks.ProductHooks``), which
    every edge passes."""
    # A client's model name is a local directory only where clients may name local files (in-process runs).
    serving = settings.serving
    registry = ModelRegistry.with_packaged_models(serving.models, hub_access=HubAccess.parse(serving.models_allow),
                                                  local_paths=settings.access.allow_file_inputs)
    engines = EnginePool(registry, serving.engine_config(), loads_models, memory_budget=serving.worker_model_memory)
    if redis_client is None:
        return JobContext(settings=settings, store=settings.storage.object_store(role), status=InMemoryJobStatusStore(),
                          leases=InMemoryLeaseStore(), enqueuer=enqueuer, registry=registry, engines=engines, hooks=hooks)
    return JobContext(settings=settings, store=settings.storage.object_store(role), status=RedisJobStatusStore(redis_client),
                      leases=RedisLeaseStore(redis_client), enqueuer=enqueuer, registry=registry, engines=engines,
                      metrics=RedisJobMetrics(redis_client), fair=RedisFairShare(redis_client),
                      workers=RedisWorkerRegistry(redis_client), throughput=RedisThroughputBoard(redis_client), hooks=hooks,
                      day_usage=RedisTenantDayUsage(redis_client))
