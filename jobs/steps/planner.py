"""Planning, the coordinator: moves a job's planning through its stages (``jobs/planning/``).

The plan task runs whenever a stage may have finished: sent at submission, by the last section
task of a stage, and by the reconciler while a job has no plan. Under the job's plan lease it
lists the input into sections, sends each section's scan task, decides duplicates and carried
documents once all are scanned, sends the cut tasks, and commits the plan once all are cut. An
input of one section is planned in this task alone. A section task that was lost is sent again.

Each run of the task builds one ``PlanningRun`` (the sections, the planning ledger and objects)
and hands it down. The planning tasks alone read and write the stage records: each stage is a
plain function of the run and of the records it is handed, and returns the record it made, which
its task writes. The ledger keeps what it read or wrote: no record is read twice.
"""
from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timezone
from typing import Any

from poolq.jobs.coordination.leases import LeaseKeeper
from poolq.jobs.coordination.work_units import PLAN_UNIT, section_unit
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.job_ledger import Plan
from poolq.jobs.ledger.planning_ledger import PlanningProgress, SectionCut, SectionScan, SectionStage
from poolq.jobs.observability.job_events import job_planned
from poolq.jobs.planning.decide import decide
from poolq.jobs.planning.plan_commit import assemble_plan
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.planning.section_cut import cut_section
from poolq.jobs.planning.section_scan import scan_section
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.dispatch import dispatch_section, finalize_if_ready, publish_plan
from poolq.jobs.steps.lost_units import LostUnits, QueueDepths


def _scan_step(run: PlanningRun, section: int) -> SectionScan:
    return run.ledger.write_scan(section, scan_section(run, section))


def _cut_step(run: PlanningRun, section: int) -> SectionCut:
    decided = run.ledger.decided()
    if decided is None:
        raise RuntimeError(f"job {run.job.id}: section {section} is cut before its duplicates were decided")
    return run.ledger.write_cut(section, cut_section(run, section, run.ledger.scan(section), decided))


# A section's stage as a planning task runs it: read the records it needs, run it, write its record.
STAGE_STEPS = {SectionStage.SCAN: _scan_step, SectionStage.CUT: _cut_step}


def plan_job(job: JobHandle) -> Plan | None:
    """Move the planning of ``job.id`` on; once planned, send its shards' tasks. Returns the plan,
    or None while it is not planned yet (or the job was cancelled)."""
    ledger = job.ledger
    cancelled = ledger.cancel_requested()
    plan = None if cancelled else ledger.plan() or _plan_under_lease(job)
    if cancelled:
        finalize_if_ready(job)
    elif plan is not None:
        publish_plan(job, plan)
    return plan


def _plan_under_lease(job: JobHandle) -> Plan | None:
    """Under the job's plan lease, move its planning on; None if another planner holds the lease."""
    ctx = job.ctx
    lease = ctx.leases.acquire(job.id, PLAN_UNIT, ctx.settings.reliability.lease_ttl_s)
    if lease is None:
        return None  # another planner is at it
    try:
        ctx.status.transition(job.id, JobState.RUNNING, started_at=datetime.now(timezone.utc))
        # Renewed while it plans, however long a stage takes: no second planner starts meanwhile.
        with LeaseKeeper(ctx.leases, lease, ctx.settings.reliability.lease_ttl_s):
            return _advance(job)
    finally:
        ctx.leases.release(lease)


def _advance(job: JobHandle) -> Plan | None:
    run = PlanningRun.for_plan_task(job)  # the sections, listed from the input the first time
    # How far planning got, read once. A section task that records its stage after this reading
    # lists the records itself, and sends the plan task again if it was the last.
    progress = run.ledger.progress(len(run.sections))
    decided = progress.decided
    if decided is None:
        scans = progress.scans if progress.scans is not None else _stage_records(run, SectionStage.SCAN, progress)
        if scans is None:
            return None
        decided = run.ledger.write_decided(decide(run, scans))  # no section is cut before this
    cuts = progress.cuts if progress.cuts is not None else _stage_records(run, SectionStage.CUT, progress)
    if cuts is None:
        return None
    return _commit(job, assemble_plan(run, cuts, decided))


def _stage_records(run: PlanningRun, stage: SectionStage, progress: PlanningProgress) -> list[Any] | None:
    """The records of a stage not every section has done: one section's stage is done here and
    now (a small input needs no hand-off); else the tasks of the sections not done (and not in
    flight) are sent, and None says the stage goes on."""
    job = run.job
    if len(run.sections) == 1:  # not done: its record would be in ``progress``
        return [STAGE_STEPS[stage](run, 0)]
    lost = LostUnits(job, time.time(), QueueDepths(job.ctx))
    missing = sorted(set(range(len(run.sections))) - progress.done[stage])
    dispatch_section(job, stage, [section for section in missing if lost(section_unit(stage, section))])
    return None


def _commit(job: JobHandle, plan: Plan) -> Plan:
    """Write ``plan.json`` (the commit point): the plan that stands, this one or a concurrent planner's."""
    ledger = job.ledger
    if not ledger.write_plan(plan):
        return ledger.plan() or plan  # a concurrent planner wrote the same plan first
    job.ctx.metrics.plan_errors(Counter(plan.error_codes))  # this planner's plan counts: its rejected records, once
    job_planned(job.id, job.tenant, plan)
    return plan
