"""A planning run: what one planning task knows of a job's planning, built once and handed down.

The plan task and each section task build one run: the job, its planning ledger (the stage
records, each read at most once: ``jobs/ledger/planning_ledger.py``), its planning objects (the
sections' data: ``planning_objects.py``) and the input's sections; the plan task also reads how
far planning got, once, as it builds its run. The stages (scan, decide, cut, commit) are plain
functions of the run and of the records they are handed: they write their data objects and return
their record; only the planning tasks read and write records.
"""
from __future__ import annotations

from dataclasses import dataclass

from poolq.jobs.inputs.input_section import InputSection
from poolq.jobs.inputs.shard_input import InputFields
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import PlanningLedger, PlanningProgress
from poolq.jobs.ledger.planning_objects import PlanningObjects
from poolq.jobs.planning.input_objects import input_objects
from poolq.jobs.planning.sections import list_sections


@dataclass(frozen=True)
class PlanningRun:
    job: JobHandle
    ledger: PlanningLedger  # the planning tasks': no stage reads it
    objects: PlanningObjects
    sections: list[InputSection]  # the input's, in input order, as stored (``planning/sections.json``)

    @classmethod
    def for_plan_task(cls, job: JobHandle) -> "tuple[PlanningRun, PlanningProgress]":
        """The plan task's run: the stored sections, else the input listed into sections and stored
        (planning's first stage; another planner's sections, if stored first, are the ones kept);
        and how far planning got."""
        ledger = PlanningLedger(job.ctx.store, job.layout)
        stored = ledger.sections()
        # How far planning got, read once. A section task that records its stage after this reading
        # lists the records itself, and sends the plan task again if it was the last. Before the
        # sections are stored no section task is sent, so nothing is done (a planner that stored them
        # meanwhile, its lease lapsed, wrote records this one would write alike: each is written once).
        progress = ledger.progress(len(stored)) if stored is not None else PlanningProgress.nothing_done()
        sections = stored if stored is not None else ledger.write_sections(
            list_sections(input_objects(job), InputFields.of(job.spec), job.ctx.settings.sharding.plan_section_bytes))
        return cls(job, ledger, PlanningObjects(job.ctx.store, job.layout), sections), progress

    @classmethod
    def for_section_task(cls, job: JobHandle) -> "PlanningRun":
        """A section task's run: the sections the plan task stored before it sent the task."""
        ledger = PlanningLedger(job.ctx.store, job.layout)
        sections = ledger.sections()
        if sections is None:
            raise RuntimeError(f"job {job.id}: a section task ran before the input's sections were stored "
                               f"({job.layout.planning_sections} is missing)")
        return cls(job, ledger, PlanningObjects(job.ctx.store, job.layout), sections)
