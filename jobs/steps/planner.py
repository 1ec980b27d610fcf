"""Planning, the coordinator: moves a job's planning through its stages (``jobs/planning/``).

The plan task runs whenever a stage may have finished: sent at submission, by the last section
task of a stage, and by the reconciler while a job has no plan. Under the job's plan lease it
lists the input into sections, sends each section's scan task, decides duplicates and carried
documents once all are scanned, sends the cut tasks, and commits the plan once all are cut. An
input of one section is planned in this task alone. A section task that was lost is sent again.

Each run of the task builds one ``PlanningRun`` (the sections and the planning ledger, which keeps
what it reads) and hands it down to every stage: no stage reads a planning record again.
"""
from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timezone

from poolq.jobs.coordination.leases import LeaseKeeper
from poolq.jobs.coordination.work_units import PLAN_UNIT, section_unit
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.error_summary import merge_all
from poolq.jobs.ledger.job_ledger import Plan
from poolq.jobs.ledger.planning_ledger import ERRORS_NAME, SectionStage
from poolq.jobs.observability.job_events import job_planned
from poolq.jobs.planning.decide import decide
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.planning.section_cut import cut_section
from poolq.jobs.planning.section_scan import scan_section
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.dispatch import dispatch_finalize, dispatch_section, finalize_if_ready, open_shards, record_plan
from poolq.jobs.steps.lost_units import LostUnits, QueueDepths

STAGE_STEPS = {SectionStage.SCAN: scan_section, SectionStage.CUT: cut_section}


def plan_job(job: JobHandle) -> Plan | None:
    """Move the planning of ``job.id`` on; once planned, send its shards' tasks. Returns the plan,
    or None while it is not planned yet."""
    ctx = job.ctx
    ledger = job.ledger
    if ledger.cancel_requested():
        finalize_if_ready(job)
        return None
    plan = ledger.plan()
    if plan is None:
        lease = ctx.leases.acquire(job.id, PLAN_UNIT, ctx.settings.reliability.lease_ttl_s)
        if lease is None:
            return None  # another planner is at it
        try:
            ctx.status.transition(job.id, JobState.RUNNING, started_at=datetime.now(timezone.utc))
            # Renewed while it plans, however long a stage takes: no second planner starts meanwhile.
            with LeaseKeeper(ctx.leases, lease, ctx.settings.reliability.lease_ttl_s):
                plan = _advance(job)
        finally:
            ctx.leases.release(lease)
        if plan is None:
            return None
    _publish(job, plan)
    return plan


def _advance(job: JobHandle) -> Plan | None:
    run = PlanningRun.for_plan_task(job)  # the sections, listed from the input the first time
    # Which sections did each stage, listed once: a section task that records its stage after this
    # listing lists the records itself, and sends the plan task again if it was the last.
    done = run.ledger.stages_done()
    if not _stage_done(run, SectionStage.SCAN, done[SectionStage.SCAN]):
        return None
    if run.ledger.decided() is None:
        decide(run)  # no section is cut before this: the listing's cuts stay right
    if not _stage_done(run, SectionStage.CUT, done[SectionStage.CUT]):
        return None
    return _commit(run)


def _stage_done(run: PlanningRun, stage: SectionStage, done: set[int]) -> bool:
    """True if every section has done ``stage`` (``done``: those that had); else send the tasks of
    those not done (and not in flight). One section is done here and now: a small input needs no hand-off."""
    job = run.job
    if len(run.sections) == 1:
        if 0 not in done:
            STAGE_STEPS[stage](run, 0)
        return True
    missing = sorted(set(range(len(run.sections))) - done)
    if not missing:
        return True
    lost = LostUnits(job, time.time(), QueueDepths(job.ctx))
    dispatch_section(job, stage, [section for section in missing if lost(section_unit(stage, section))])
    return False


def _commit(run: PlanningRun) -> Plan:
    """Concatenate the sections' error lines, then write ``plan.json`` (the commit point)."""
    job = run.job
    planning = run.ledger
    decided = planning.decided()
    if decided is None:  # read or written before the cut stage, and kept by the run's ledger: never None here
        raise RuntimeError(f"job {job.id}: the plan is committed before its planning decisions were made")
    cuts = [planning.cut(index) for index in range(len(run.sections))]
    error_keys = [planning.section_key(index, ERRORS_NAME) for index, cut in enumerate(cuts) if cut.errors]

    def error_chunks():  # streamed: the error file is never held whole
        for key in error_keys:
            with job.ctx.store.open(key) as stream:
                yield from iter(lambda: stream.read(4 << 20), b"")

    job.ctx.store.put_chunks(job.layout.plan_errors, error_chunks())
    errors = merge_all(cut.errors_summary for cut in cuts)
    plan = Plan(total=sum(cut.records for cut in cuts), plan_errors=errors.count,
                section_shards=tuple(cut.shards for cut in cuts), carried=decided.carried,
                carried_records=decided.carried_records, engine=decided.engine, superseded=decided.superseded,
                error_codes=errors.codes, error_samples=list(errors.samples), field_types=decided.field_types,
                characters=sum(cut.characters for cut in cuts))
    ledger = job.ledger
    if not ledger.write_plan(plan):
        return ledger.plan() or plan  # a concurrent planner wrote the same plan first
    job.ctx.metrics.plan_errors(Counter(errors.codes))  # this planner's plan counts: its rejected records, once
    job_planned(job.id, job.tenant, plan)
    return plan


def _publish(job: JobHandle, plan: Plan) -> None:
    """Cache the plan in the status store; its shards join fair share, and the free slots go out."""
    record_plan(job, plan)
    if plan.num_shards == 0:
        dispatch_finalize(job)
        return
    open_shards(job, plan)  # the rest follow, by fair share, as shards commit
    job.ctx.hooks.job_planned(job)  # the products': the webhook's job.running, with the job's place
