"""A job bound once: a task binds its job id to a JobHandle and passes the handle on.

The handle carries what every step asks of a job (its id, tenant, layout and ledger) and the
process's wiring (``ctx``); the spec and plan are read on first use, and once per process
(``JobContext.specs``/``plans``: both are written once and never change).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from poolq.jobs.context import JobContext
from poolq.jobs.ledger.engine_claim import claimed_engine
from poolq.jobs.ledger.job_ledger import JobLedger, Plan
from poolq.jobs.ledger.layout import JobLayout
from poolq.jobs.spec.engine_identity import EngineIdentity
from poolq.jobs.spec.job_ids import JobNotFound
from poolq.jobs.spec.job_spec import JobSpec
from poolq.storage import ObjectNotFoundError


@dataclass(frozen=True)
class JobHandle:
    ctx: JobContext = field(repr=False, compare=False)
    id: str
    tenant: str
    layout: JobLayout
    ledger: JobLedger = field(repr=False, compare=False)

    @classmethod
    def bind(cls, ctx: JobContext, job_id: str) -> "JobHandle":
        """The handle of ``job_id``; JobNotFound if there is no such job."""
        tenant = ctx.tenant_of(job_id)
        if tenant is None:
            raise JobNotFound(job_id)
        return cls.of_tenant(ctx, job_id, tenant)

    @classmethod
    def of_tenant(cls, ctx: JobContext, job_id: str, tenant: str) -> "JobHandle":
        """The handle of ``tenant``'s job ``job_id``, as a submission makes it (nothing is read)."""
        layout = ctx.service_layout.job(tenant, job_id)
        return cls(ctx, job_id, tenant, layout, JobLedger(ctx.store, layout))

    @cached_property
    def spec(self) -> JobSpec:
        """The job's spec (written at submission, never changed)."""
        return self.ctx.specs.get(self.id, lambda: JobSpec.model_validate_json(self.ctx.store.get(self.layout.spec)))

    @property
    def compute_dtype(self) -> str:
        """The dtype the job's rows are computed in here: its pin, else the one its first shard claimed
        (docs/engine.md, "One engine per job"), else this worker's own."""
        spec = self.spec
        if spec.compute_dtype != "auto":
            return spec.compute_dtype
        claimed = self.claimed_engine()
        return claimed.dtype if claimed is not None else self.ctx.engines.dtype_for()

    def claimed_engine(self) -> EngineIdentity | None:
        """The engine the job's rows come from, claimed by its first shard; None before that, or for a
        job that allows mixed engines (read from the ledger at each call: it is claimed meanwhile)."""
        return None if self.spec.allow_mixed_engines else claimed_engine(self.ledger)

    @property
    def plan(self) -> Plan:
        """The job's plan; ObjectNotFoundError while the job is not planned yet."""
        return self.ctx.plans.get(self.id, self._read_plan)

    def _read_plan(self) -> Plan:
        plan = self.ledger.plan()
        if plan is None:
            raise ObjectNotFoundError(f"job {self.id} has no plan yet")
        return plan

    @classmethod
    def unsubmitted(cls, ctx: JobContext, spec: JobSpec, tenant: str) -> "JobHandle":
        """A handle on ``spec`` that was never submitted (an estimate reads its input as planning
        would): it has no id of its own and nothing of it is in the ledger."""
        handle = cls.of_tenant(ctx, UNSUBMITTED_JOB_ID, tenant)
        handle.__dict__["spec"] = spec  # the cached_property's slot: never read from the store
        return handle


UNSUBMITTED_JOB_ID = "0" * 32  # no job has it: new_job_id is random
