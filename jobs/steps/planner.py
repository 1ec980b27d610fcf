"""The plan task: moves a job's planning through its stages (``planning_stages.py``), under its plan lease.

The plan task runs whenever a stage may have finished: sent at submission, by the last section
task of a stage, and by the reconciler while a job has no plan. Under the job's plan lease it
lists the input into sections, sends each section's scan task, decides duplicates and carried
documents once all are scanned, sends the cut tasks, and commits the plan once all are cut. An
input of one section is planned in this task alone. A section task that was lost is sent again.

Each run of the task reads the job's ledger once (a cancel, a plan), builds one ``PlanningRun``
(the sections, the planning ledger and objects, and how far planning got) and hands it down.
"""
from __future__ import annotations

from datetime import datetime, timezone

from poolq.jobs.coordination.leases import lease_held
from poolq.jobs.coordination.work_units import PLAN_UNIT
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.job_ledger import Plan
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.dispatch import finalize_if_ready, publish_plan
from poolq.jobs.steps.planning_stages import advance_planning


def plan_job(job: JobHandle) -> Plan | None:
    """Move the planning of ``job.id`` on; once planned, send its shards' tasks. Returns the plan,
    or None while it is not planned yet (or the job was cancelled)."""
    ledger = job.ledger
    cancelled = ledger.cancel_requested()
    plan = None if cancelled else ledger.plan()
    if plan is None and not cancelled:
        ctx = job.ctx
        # Renewed while it plans, however long a stage takes: no second planner starts meanwhile.
        with lease_held(ctx.leases, job.id, PLAN_UNIT, ctx.settings.reliability.lease_ttl_s) as lease:
            if lease is not None:  # else another planner is at it
                ctx.status.transition(job.id, JobState.RUNNING, started_at=datetime.now(timezone.utc))
                run, progress = PlanningRun.for_plan_task(job)  # the sections, listed from the input the first time
                plan = advance_planning(run, progress)
    if cancelled:
        finalize_if_ready(job)
    elif plan is not None:
        publish_plan(job, plan)
    return plan
