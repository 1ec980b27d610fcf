"""Each planning task reads each planning record from the bucket at most once: the run it builds
(``PlanningRun``) is handed down to every stage, and its ledger keeps what it read or wrote."""
import json
from collections import Counter

from support.job_doubles import RecordingEnqueuer, run_task

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context


def _counting_reads(ctx, monkeypatch) -> Counter:
    """Every GET of the store, by key (a GET of a missing object counts: it is a request too), and
    every listing, as ``("list", prefix)``."""
    reads: Counter = Counter()
    get, listing = ctx.store.get, ctx.store.list

    def counted_get(key):
        reads[key] += 1
        return get(key)

    def counted_list(prefix):
        reads["list", prefix] += 1
        return listing(prefix)

    monkeypatch.setattr(ctx.store, "get", counted_get)
    monkeypatch.setattr(ctx.store, "list", counted_list)
    return reads


def _planning_records_read_twice(reads: Counter, prefix: str) -> dict[str, int]:
    return {key: count for key, count in reads.items()
            if isinstance(key, str) and key.startswith(prefix) and key.endswith(".json") and count > 1}


def test_a_one_section_job_is_planned_reading_each_planning_record_once(tmp_path, monkeypatch):
    # Given a small inline job, planned wholly by its plan task (list, scan, decide, cut, commit)
    ctx = local_context(tmp_path / "out", Settings())
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"documents": [
        {"id": "a", "text": "one"}, {"id": "b", "text": "two"}, {"id": "a", "text": "a repeated id"}]}})).id
    reads = _counting_reads(ctx, monkeypatch)
    # When the plan task runs
    run_task(ctx.enqueuer.take()[0], ctx)
    # Then the job is planned, and no planning record (sections, scan, decisions, cut) was read twice
    layout = JobHandle.bind(ctx, job_id).layout
    plan = JobHandle.bind(ctx, job_id).ledger.plan()
    assert plan is not None and (plan.total, plan.plan_errors) == (3, 1)
    assert [key for key in reads if str(key).startswith(layout.planning_prefix)]  # the count saw the planning reads
    assert _planning_records_read_twice(reads, layout.planning_prefix) == {}


def test_every_task_of_a_job_planned_in_sections_reads_each_planning_record_once(tmp_path, monkeypatch):
    # Given an input of several sections, its planning spread over section tasks
    lines = [json.dumps({"id": f"d{i}", "text": f"document {i} " + "word " * 10}) for i in range(60)]
    (tmp_path / "input.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ctx = local_context(tmp_path / "out", Settings(plan_section_bytes=1 << 10))
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"uri": (tmp_path / "input.jsonl").as_uri()}})).id
    layout = JobHandle.bind(ctx, job_id).layout
    reads = _counting_reads(ctx, monkeypatch)
    # When each planning task runs in turn, until the plan is committed
    read_twice: list[tuple] = []
    listed_twice: list[tuple] = []
    kinds: Counter[str] = Counter()
    while (task := next((task for task in ctx.enqueuer.tasks if task[0] in ("plan", "plan_section")), None)) is not None:
        ctx.enqueuer.tasks.remove(task)
        reads.clear()
        run_task(task, ctx)
        kinds[task[0] if task[0] == "plan" else task[2]] += 1
        read_twice += [(task, key) for key in _planning_records_read_twice(reads, layout.planning_prefix)]
        if reads["list", layout.planning_stages_prefix] > 1:
            listed_twice.append(task)
    # Then the job was planned over scan and cut tasks, and no task read a planning record twice,
    # nor listed the stage records twice
    assert JobHandle.bind(ctx, job_id).ledger.plan() is not None
    assert kinds["scan"] > 1 and kinds["cut"] > 1 and kinds["plan"] >= 3
    assert read_twice == [] and listed_twice == []
