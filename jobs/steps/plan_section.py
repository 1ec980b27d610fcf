"""A section's planning stage, as its own task: scan or cut one section of the input.

Runs under the section's lease (renewed while it reads); a section already done is not read
again. The task that finds its stage done for every section sends the plan task on. The task
builds one ``PlanningRun`` and hands it to the stage: the sections are read once.
"""
from __future__ import annotations

from poolq.jobs.coordination.leases import lease_held
from poolq.jobs.coordination.work_units import section_unit
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import SectionStage
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.steps.dispatch import dispatch_plan
from poolq.jobs.steps.planning_stages import STAGE_STEPS


def plan_section(job: JobHandle, stage: SectionStage, section: int) -> None:
    ctx = job.ctx
    ledger = job.ledger
    if ledger.cancel_requested() or ledger.manifest_written():
        return  # nothing to plan for: the plan task (or the finalizer) sees to the job
    run = PlanningRun.for_section_task(job)
    if not run.ledger.is_done(stage, section):
        with lease_held(ctx.leases, job.id, section_unit(stage, section), ctx.settings.reliability.lease_ttl_s) as lease:
            if lease is None:
                return  # another attempt is at it
            STAGE_STEPS[stage](run, section)
    if run.ledger.done(stage) >= set(range(len(run.sections))):
        dispatch_plan(job)  # the stage is over: the planner moves on
