"""Each planning stage is a plain function of the run and of the records it is handed: it writes
its data objects and returns its record; only the planning task that ran it writes the record."""
from support.job_doubles import RecordingEnqueuer

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import SectionStage
from poolq.jobs.planning.decide import decide
from poolq.jobs.planning.plan_commit import assemble_plan
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.planning.section_cut import cut_section
from poolq.jobs.planning.section_scan import scan_section
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps import planning_stages
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context


def _run(tmp_path) -> PlanningRun:
    """A submitted job of one section (three records, one id repeated), its plan task not run."""
    ctx = local_context(tmp_path / "out", Settings())
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"documents": [
        {"id": "a", "text": "one"}, {"id": "b", "text": "two"}, {"id": "a", "text": "a repeated id"}]}})).id
    return PlanningRun.for_plan_task(JobHandle.bind(ctx, job_id))[0]


def test_the_stages_return_their_records_and_write_none(tmp_path):
    run = _run(tmp_path)
    layout = run.job.layout
    store = run.job.ctx.store
    # When each stage runs on its own, handed the records the one before returned
    scan = scan_section(run, 0)
    decided = decide(run, [scan])
    cut = cut_section(run, 0, scan, decided)
    plan = assemble_plan(run, [cut], decided)
    # Then each returned its record, whose figures agree with the input
    assert (scan.valid, decided.duplicates, cut.records, cut.errors) == (3, 1, 3, 1)
    assert (plan.total, plan.plan_errors, plan.num_shards) == (3, 1, 1)
    # and wrote its data objects, but no record: neither a stage record, the decision nor the plan
    assert store.exists(layout.section_object(0, "ids.tsv")) and store.exists(layout.section_object(0, "errors.jsonl"))
    assert not any(run.ledger.is_done(stage, 0) for stage in SectionStage)
    assert not store.exists(layout.planning_decided) and run.job.ledger.plan() is None


def test_a_planning_task_step_writes_the_record_its_stage_returned(tmp_path):
    run = _run(tmp_path)
    # When the planner's scan step runs the scan stage
    scan = planning_stages.STAGE_STEPS[SectionStage.SCAN](run, 0)
    # Then its record is written, and a second planning task reads the same record back
    fresh = PlanningRun.for_section_task(run.job)
    assert run.ledger.is_done(SectionStage.SCAN, 0) and fresh.ledger.scan(0) == scan
