"""Planning's stages, moved on by the planning tasks: scan each section, decide, cut each section, commit.

A planning task builds one ``PlanningRun`` (the sections, the planning ledger and objects, and for
the plan task how far planning got) and hands it here. Each stage is a plain function of the run
and of the records it is handed (``jobs/planning/``), and returns the record it made; the task
writes it. The ledger keeps what it read or wrote: no record is read twice.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Any

from poolq.jobs.coordination.work_units import section_unit
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.job_ledger import Plan
from poolq.jobs.ledger.planning_ledger import PlanningProgress, SectionCut, SectionScan, SectionStage
from poolq.jobs.observability.job_events import job_planned
from poolq.jobs.planning.decide import decide
from poolq.jobs.planning.plan_commit import assemble_plan
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.planning.section_cut import cut_section
from poolq.jobs.planning.section_scan import scan_section
from poolq.jobs.steps.dispatch import dispatch_section
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


def advance_planning(run: PlanningRun, progress: PlanningProgress) -> Plan | None:
    """Move the plan task's ``run`` on from ``progress``: the plan, once committed; None while a
    stage goes on in section tasks."""
    decided = progress.decided
    if decided is None:
        scans = progress.scans if progress.scans is not None else _stage_records(run, SectionStage.SCAN, progress)
        if scans is None:
            return None
        decided = run.ledger.write_decided(decide(run, scans))  # no section is cut before this
    cuts = progress.cuts if progress.cuts is not None else _stage_records(run, SectionStage.CUT, progress)
    if cuts is None:
        return None
    return _commit(run.job, assemble_plan(run, cuts, decided))


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
