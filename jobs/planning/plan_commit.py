"""The commit stage: the sections' cuts and the decided record, assembled into the job's plan.

Concatenates the sections' error lines into the job's plan-error file (streamed: never held
whole) and returns the ``Plan``; the plan task writes it (``plan.json``, the commit point).
"""
from __future__ import annotations

from poolq.jobs.ledger.error_summary import merge_all
from poolq.jobs.ledger.job_ledger import Plan
from poolq.jobs.ledger.planning_ledger import Decided, SectionCut
from poolq.jobs.ledger.planning_objects import ERRORS_NAME
from poolq.jobs.planning.planning_run import PlanningRun

_READ_CHUNK = 4 << 20


def assemble_plan(run: PlanningRun, cuts: list[SectionCut], decided: Decided) -> Plan:
    """The plan of every section's ``cuts`` (in input order) as ``decided``, its error lines written."""
    objects = run.objects
    with_errors = [index for index, cut in enumerate(cuts) if cut.errors]

    def error_chunks():
        for index in with_errors:
            with objects.open(index, ERRORS_NAME) as stream:
                yield from iter(lambda: stream.read(_READ_CHUNK), b"")

    run.job.ctx.store.put_chunks(run.job.layout.plan_errors, error_chunks())
    errors = merge_all(cut.errors_summary for cut in cuts)
    return Plan(total=sum(cut.records for cut in cuts), plan_errors=errors.count,
                section_shards=tuple(cut.shards for cut in cuts), carried=decided.carried,
                carried_records=decided.carried_records, engine=decided.engine, superseded=decided.superseded,
                error_codes=errors.codes, error_samples=list(errors.samples), field_types=decided.field_types,
                characters=sum(cut.characters for cut in cuts))
