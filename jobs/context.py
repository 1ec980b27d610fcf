"""Everything a job step needs, built once per process from Settings."""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, TypeVar

from poolq.engine import ModelRegistry
from poolq.jobs.coordination.dispatch_window import DispatchWindow, InMemoryDispatchWindow, RedisDispatchWindow
from poolq.jobs.coordination.enqueuer import Enqueuer
from poolq.jobs.coordination.leases import InMemoryLeaseStore, LeaseStore, RedisLeaseStore
from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.coordination.redis_status_store import RedisJobStatusStore
from poolq.jobs.coordination.status_store import JobStatusStore
from poolq.jobs.ledger.job_ledger import JobLedger, Plan
from poolq.jobs.ledger.layout import JobLayout, ServiceLayout
from poolq.jobs.model.job_ids import JobNotFound, is_job_id
from poolq.jobs.model.job_spec import JobSpec
from poolq.jobs.observability.job_metrics import InMemoryJobMetrics, JobMetrics, RedisJobMetrics
from poolq.jobs.settings import Settings
from poolq.storage import ObjectNotFoundError, ObjectStore

_T = TypeVar("_T")
_SPECS_KEPT = 256  # a worker serves a few jobs at a time; older specs are read again if needed

if TYPE_CHECKING:
    import redis

    from poolq.engine import PoolingEngine


@dataclass
class JobContext:
    settings: Settings
    store: ObjectStore
    status: JobStatusStore
    leases: LeaseStore
    enqueuer: Enqueuer
    registry: ModelRegistry
    metrics: JobMetrics = field(default_factory=InMemoryJobMetrics)  # work done, for /metrics
    window: DispatchWindow = field(default_factory=InMemoryDispatchWindow)  # shard tasks in flight
    _engines: dict[str, "PoolingEngine"] = field(default_factory=dict, repr=False)
    _engine_identities: dict[str, str] = field(default_factory=dict, repr=False)
    # model -> why it cannot be served here: a verdict of the model's own (int8's quality gate),
    # kept so that every later shard fails at once instead of loading and calibrating again
    _engine_refusals: dict[str, ValueError] = field(default_factory=dict, repr=False)
    # job id -> tenant; safe to cache forever: a job's tenant never changes
    _tenants: dict[str, str] = field(default_factory=dict, repr=False)
    _tenants_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _specs: OrderedDict[str, JobSpec] = field(default_factory=OrderedDict, repr=False)  # recent jobs' specs
    _plans: OrderedDict[str, Plan] = field(default_factory=OrderedDict, repr=False)  # and their plans

    @property
    def service_layout(self) -> ServiceLayout:
        return ServiceLayout(self.settings.output_prefix)

    def register_job(self, job_id: str, tenant: str) -> None:
        """Record the job's tenant (first write of a submission; a repeat keeps the first)."""
        record = json.dumps({"tenant": tenant}).encode()
        self.store.put_once(self.service_layout.job_index(job_id), record)

    def tenant_of(self, job_id: str) -> str | None:
        """The tenant owning ``job_id``, or None if there is no such job."""
        if not is_job_id(job_id):
            return None
        with self._tenants_lock:
            if job_id in self._tenants:
                return self._tenants[job_id]
        try:
            tenant = json.loads(self.store.get(self.service_layout.job_index(job_id)))["tenant"]
        except ObjectNotFoundError:
            return None
        with self._tenants_lock:
            self._tenants[job_id] = tenant
        return tenant

    def layout(self, job_id: str) -> JobLayout:
        tenant = self.tenant_of(job_id)
        if tenant is None:
            raise JobNotFound(job_id)
        return self.service_layout.job(tenant, job_id)

    def ledger(self, job_id: str) -> JobLedger:
        return JobLedger(self.store, self.layout(job_id))

    def spec(self, job_id: str) -> JobSpec:
        """The job's spec, read once per process (it never changes once written)."""
        return self._cached(self._specs, job_id,
                            lambda: JobSpec.model_validate_json(self.store.get(self.layout(job_id).spec)))

    def plan(self, job_id: str) -> Plan:
        """The job's plan, read once per process (written once, never changed); ObjectNotFoundError
        if the job is not planned yet."""
        def read() -> Plan:
            plan = self.ledger(job_id).plan()
            if plan is None:
                raise ObjectNotFoundError(f"job {job_id} has no plan yet")
            return plan
        return self._cached(self._plans, job_id, read)

    def _cached(self, cache: "OrderedDict[str, _T]", job_id: str, read: Callable[[], _T]) -> _T:
        with self._tenants_lock:
            if job_id in cache:
                cache.move_to_end(job_id)
                return cache[job_id]
        value = read()
        with self._tenants_lock:
            cache[job_id] = value
            while len(cache) > _SPECS_KEPT:
                cache.popitem(last=False)
        return value

    def use_engine(self, model: str, engine: "PoolingEngine") -> None:
        """Serve ``model`` with an engine loaded elsewhere (tests and embedding callers share one)."""
        self._engines[model] = engine

    def engine(self, model: str) -> "PoolingEngine":
        """The loaded engine for ``model``; loaded once per process, on first use. A model this
        process refused to serve (``Int8Refused``) is refused again without loading it."""
        if model in self._engine_refusals:
            refused = self._engine_refusals[model]
            raise type(refused)(*refused.args)  # a new one: re-raising one instance grows its traceback
        if model not in self._engines:
            from poolq.engine import PoolingEngine
            from poolq.engine.models.int8_encoder import Int8Refused

            try:
                self._engines[model] = PoolingEngine.from_pretrained(
                    model, config=self.settings.engine_config(), registry=self.registry
                )
            except Int8Refused as refused:
                self._engine_refusals[model] = refused
                raise
        return self._engines[model]

    def engine_identity(self, model: str) -> str:
        """What makes ``model``'s vectors here: its files' fingerprint and the compute dtype
        (``sha256:…/float32``). Taken once per process, like the engine it describes."""
        if model not in self._engine_identities:
            self._engine_identities[model] = f"{self.registry.fingerprint(model)}/{self.settings.compute_dtype}"
        return self._engine_identities[model]


def build_context(settings: Settings, enqueuer: Enqueuer, redis_client: "redis.Redis | None" = None) -> JobContext:
    """The one way a process gets its context. With ``redis_client`` (the API, workers, beat) the
    status cache, leases and counters are shared in Redis; without it (a job run in this process)
    they live in memory. Either way the store is the ledger."""
    registry = ModelRegistry.with_packaged_models(settings.models)
    if redis_client is None:
        return JobContext(settings=settings, store=settings.object_store(), status=InMemoryJobStatusStore(),
                          leases=InMemoryLeaseStore(), enqueuer=enqueuer, registry=registry)
    return JobContext(settings=settings, store=settings.object_store(), status=RedisJobStatusStore(redis_client),
                      leases=RedisLeaseStore(redis_client), enqueuer=enqueuer, registry=registry,
                      metrics=RedisJobMetrics(redis_client), window=RedisDispatchWindow(redis_client))
