"""A section's planning stage, as its own task: scan or cut one section of the input.

Runs under the section's lease (renewed while it reads); a section already done is not read
again. The task that finds its stage done for every section sends the plan task on.
"""
from __future__ import annotations

from poolq.jobs.coordination.leases import LeaseKeeper
from poolq.jobs.coordination.work_units import section_unit
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import PlanningLedger, SectionStage
from poolq.jobs.steps.dispatch import dispatch_plan
from poolq.jobs.steps.planner import STAGE_STEPS


def plan_section(job: JobHandle, stage: SectionStage, section: int) -> None:
    ctx = job.ctx
    ledger = job.ledger
    if ledger.cancel_requested() or ledger.manifest_written():
        return  # nothing to plan for: the plan task (or the finalizer) sees to the job
    planning = PlanningLedger(ctx.store, job.layout)
    if not planning.is_done(stage, section):
        lease = ctx.leases.acquire(job.id, section_unit(stage, section), ctx.settings.lease_ttl_s)
        if lease is None:
            return  # another attempt is at it
        try:
            with LeaseKeeper(ctx.leases, lease, ctx.settings.lease_ttl_s):
                STAGE_STEPS[stage](job, section)
        finally:
            ctx.leases.release(lease)
    sections = planning.sections() or []
    if planning.done(stage) >= set(range(len(sections))):
        dispatch_plan(job)  # the stage is over: the planner moves on
