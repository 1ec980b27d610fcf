"""Everything a job step needs, built once per process from Settings."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine import ModelRegistry
from storage import ObjectStore

from .enqueuer import Enqueuer
from .job import JobSpec
from .layout import JobLayout, ServiceLayout
from .leases import LeaseStore
from .ledger import JobLedger
from .settings import Settings
from .status_store import JobStatusStore

if TYPE_CHECKING:
    from engine import PoolingEngine


@dataclass
class JobContext:
    settings: Settings
    store: ObjectStore
    status: JobStatusStore
    leases: LeaseStore
    enqueuer: Enqueuer
    registry: ModelRegistry
    _engines: dict[str, "PoolingEngine"] = field(default_factory=dict, repr=False)

    @property
    def service_layout(self) -> ServiceLayout:
        return ServiceLayout(self.settings.output_prefix)

    def layout(self, job_id: str) -> JobLayout:
        return JobLayout(self.settings.output_prefix, job_id)

    def ledger(self, job_id: str) -> JobLedger:
        return JobLedger(self.store, self.layout(job_id))

    def spec(self, job_id: str) -> JobSpec:
        return JobSpec.model_validate_json(self.store.get(self.layout(job_id).spec))

    def use_engine(self, model: str, engine: "PoolingEngine") -> None:
        """Serve ``model`` with an engine loaded elsewhere (tests and embedding callers share one)."""
        self._engines[model] = engine

    def engine(self, model: str) -> "PoolingEngine":
        """The loaded engine for ``model``; loaded once per process, on first use."""
        if model not in self._engines:
            from engine import PoolingEngine

            self._engines[model] = PoolingEngine.from_pretrained(
                model, config=self.settings.engine_config(), registry=self.registry
            )
        return self._engines[model]

