"""Planning in sections spread over tasks: the same plan whatever the sections and the order of
their tasks, every record once (in one shard or in the error file), a lost section re-sent."""
import gzip
import json
import random
import time

import pytest
from support.job_doubles import PLANNING, RecordingEnqueuer, drain, run_task

from poolq.jobs.inputs.shard_input import InputFields, ShardInput, read_shard_records
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import PlanningLedger, SectionStage
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps import planning_stages
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context
from poolq.worker.reconciler import reconcile


def _corpus(folder) -> dict[str, list[str]]:
    """Three objects of awkward lines: a BOM, blank lines, bad JSON, missing fields, repeated ids
    (within an object, and across objects), and a gzip object."""
    rng = random.Random(7)
    a = ['\ufeff{"id": "a0", "text": "first line, after a byte order mark"}']
    for i in range(1, 120):
        kind = rng.randrange(10)
        if kind == 0:
            a.append("")
        elif kind == 1:
            a.append('{"id": "broken", "text": ')
        elif kind == 2:
            a.append(f'{{"id": "a{i}"}}')
        elif kind == 3:
            a.append(f'{{"id": "a{rng.randrange(i)}", "text": "a repeated id {i}"}}')
        else:
            a.append(json.dumps({"id": f"a{i}", "text": f"document {i} " + "word " * rng.randrange(1, 30)}))
    b = [json.dumps({"id": "a5", "text": "repeats an id of the first object"}), "",
         *(json.dumps({"id": f"b{i}", "text": f"b document {i}"}) for i in range(40))]
    c = [json.dumps({"id": f"c{i}", "text": f"compressed {i}"}) for i in range(30)] + [json.dumps({"id": "b3", "text": "dup"})]
    folder.mkdir()
    (folder / "a.jsonl").write_text("\n".join(a) + "\n", encoding="utf-8")
    (folder / "b.jsonl").write_text("\n".join(b), encoding="utf-8")  # no final newline
    (folder / "c.jsonl.gz").write_bytes(gzip.compress(("\n".join(c) + "\n").encode()))
    return {"a.jsonl": a, "b.jsonl": b, "c.jsonl.gz": c}


def _oracle(corpus: dict[str, list[str]]) -> tuple[list[tuple[str, str, int]], set[tuple[str, int]], set[tuple[str, int]]]:
    """What one simple pass decides: the records kept (object, id, line), the erroneous lines and,
    among them, the repeated ids."""
    kept, errors, duplicates, seen = [], set(), set(), set()
    for name, lines in corpus.items():
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line.lstrip("\ufeff"))
            except json.JSONDecodeError:
                errors.add((name, number))
                continue
            if "text" not in value or value["id"] in seen:
                errors.add((name, number))
                if "text" in value:
                    duplicates.add((name, number))
                continue
            seen.add(value["id"])
            kept.append((name, value["id"], number))
    return kept, errors, duplicates


def _plan(tmp_path, folder, name: str, section_bytes: int, shuffle: int | None = None):
    ctx = local_context(tmp_path / name, Settings(plan_section_bytes=section_bytes, shard_max_documents=16))
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"uri": f"file://{folder}/"}})).id
    if shuffle is None:
        drain(ctx, only=PLANNING)
    else:  # any order the workers pick the section tasks in
        rng = random.Random(shuffle)
        while runnable := [task for task in ctx.enqueuer.tasks if task[0] in PLANNING]:
            task = rng.choice(runnable)
            ctx.enqueuer.tasks.remove(task)
            run_task(task, ctx)
    return ctx, job_id


def _kept(ctx, job_id) -> list[tuple[str, str, int]]:
    plan, layout, kept = JobHandle.bind(ctx, job_id).ledger.plan(), JobHandle.bind(ctx, job_id).layout, []
    for shard in range(plan.num_shards):
        shard_input = ShardInput.from_bytes(ctx.store.get(layout.shard_input(*plan.shard_location(shard))))
        rows = read_shard_records(shard_input, InputFields(), ctx.settings.storage.s3_config())
        kept += sorted((shard_input.uri.rsplit("/", 1)[-1], row_id, row.line) for row_id, row in rows.items())
    return kept


def _errors(ctx, job_id) -> list[dict]:
    return [json.loads(line) for line in ctx.store.get(JobHandle.bind(ctx, job_id).layout.plan_errors).splitlines()]


@pytest.mark.parametrize("section_bytes,shuffle", [(1 << 10, None), (1 << 10, 3), (2 << 10, 11)])
def test_small_sections_in_any_order_plan_what_one_simple_pass_decides(tmp_path, section_bytes, shuffle):
    corpus = _corpus(tmp_path / "corpus")
    expected_kept, expected_errors, expected_duplicates = _oracle(corpus)
    # Given the corpus planned in sections of ~1-2 KiB (tasks run in recorded or shuffled order)
    ctx, job_id = _plan(tmp_path, tmp_path / "corpus", "small", section_bytes, shuffle)
    sections = PlanningLedger(ctx.store, JobHandle.bind(ctx, job_id).layout).sections()
    # and planned again with one section per object
    whole_ctx, whole_id = _plan(tmp_path, tmp_path / "corpus", "whole", 64 << 20)
    # Then the sections are many, and each record is kept once, in input order, or is an error
    assert len(sections) > 6 and len(PlanningLedger(whole_ctx.store, JobHandle.bind(whole_ctx, whole_id).layout).sections()) == 3
    kept = sorted(_kept(ctx, job_id), key=lambda k: (list(corpus).index(k[0]), k[2]))
    assert kept == expected_kept
    errors = _errors(ctx, job_id)
    assert {(e["source"].rsplit("/", 1)[-1], e["line"]) for e in errors} == expected_errors
    duplicates = {(e["source"].rsplit("/", 1)[-1], e["line"]) for e in errors if e["code"] == "duplicate_id"}
    assert duplicates == expected_duplicates and ("b.jsonl", 1) in duplicates and ("c.jsonl.gz", 31) in duplicates
    # and the error file, totals and shard contents equal the one-section-per-object plan's
    assert errors == _errors(whole_ctx, whole_id)
    plan, whole = JobHandle.bind(ctx, job_id).ledger.plan(), JobHandle.bind(whole_ctx, whole_id).ledger.plan()
    assert (plan.total, plan.plan_errors) == (whole.total, whole.plan_errors) == (
        sum(1 for lines in corpus.values() for line in lines if line.strip()), len(expected_errors))
    assert sorted(kept) == sorted(_kept(whole_ctx, whole_id))


def test_each_section_is_scanned_and_cut_by_its_own_task_and_a_repeat_changes_nothing(tmp_path):
    _corpus(tmp_path / "corpus")
    ctx = local_context(tmp_path / "out", Settings(plan_section_bytes=1 << 10))
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"uri": f"file://{tmp_path / 'corpus'}/"}})).id
    # When the plan task runs: it lists the sections and sends one scan task per section
    run_task(ctx.enqueuer.take()[0], ctx)
    planning = PlanningLedger(ctx.store, JobHandle.bind(ctx, job_id).layout)
    count = len(planning.sections())
    scans = ctx.enqueuer.take()
    assert scans == [("plan_section", job_id, "scan", n) for n in range(count)]
    # and every scan runs twice (a redelivered message): the second reads nothing again
    for task in scans + scans:
        run_task(task, ctx)
    assert ctx.enqueuer.take() == [("plan", job_id)] * (count + 1)  # the stage ended: the planner moves on
    run_task(("plan", job_id), ctx)
    cuts = ctx.enqueuer.take()
    assert cuts == [("plan_section", job_id, "cut", n) for n in range(count)]
    for task in cuts:
        run_task(task, ctx)
    run_task(ctx.enqueuer.take()[-1], ctx)
    # Then the plan is committed and its first shards are sent
    assert JobHandle.bind(ctx, job_id).ledger.plan() is not None and ctx.enqueuer.take()[0][0] == "shard"


def test_a_lost_section_task_is_sent_again_and_only_it_is_read_again(tmp_path, monkeypatch):
    _corpus(tmp_path / "corpus")
    ctx = local_context(tmp_path / "out", Settings(plan_section_bytes=1 << 10, requeue_after_s=0.05))
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"uri": f"file://{tmp_path / 'corpus'}/"}})).id
    scanned = []
    scan = planning_stages.STAGE_STEPS[SectionStage.SCAN]
    monkeypatch.setitem(planning_stages.STAGE_STEPS, SectionStage.SCAN,
                        lambda job, section: (scanned.append(section), scan(job, section))[1])
    run_task(ctx.enqueuer.take()[0], ctx)
    # Given every scan task but section 2's ran (its message was lost)
    for task in ctx.enqueuer.take():
        if task[3] != 2:
            run_task(task, ctx)
    assert JobHandle.bind(ctx, job_id).ledger.plan() is None and ctx.enqueuer.take() == []
    # When the reconciler runs after the re-send delay: it sends the plan task, which re-sends section 2
    time.sleep(0.1)
    reconcile(ctx)
    drain(ctx, only=PLANNING)
    # Then the job is planned, and section 2 was the only one scanned again (every other once)
    assert JobHandle.bind(ctx, job_id).ledger.plan() is not None
    assert sorted(scanned) == sorted(set(scanned)) and 2 in scanned


def test_a_section_whose_object_changed_fails_the_planning_saying_so(tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    ctx = local_context(tmp_path / "out", Settings(plan_section_bytes=1 << 10))
    ctx.enqueuer = RecordingEnqueuer()
    submit_job(ctx, JobSpec.model_validate({"input": {"uri": f"file://{tmp_path / 'corpus'}/"}}))
    run_task(ctx.enqueuer.take()[0], ctx)
    # When b.jsonl is replaced after the sections were listed
    (tmp_path / "corpus" / "b.jsonl").write_text("\n".join(corpus["b.jsonl"][:3]) + "\n")
    scans = ctx.enqueuer.take()
    failures = []
    for task in scans:
        try:
            run_task(task, ctx)
        except Exception as exc:  # noqa: BLE001 - what the worker would fail the job with
            failures.append(str(exc))
    # Then the scans of its sections fail, naming the object and what to do
    assert failures and all("b.jsonl was replaced while the job was planned" in f and "submit the job again" in f
                            for f in failures)


def test_a_finished_job_keeps_its_stage_records_but_not_its_id_spills(tmp_path, minilm_engine):
    from poolq.worker.local_runner import run_job_locally

    _corpus(tmp_path / "corpus")
    ctx = local_context(tmp_path / "out", Settings(plan_section_bytes=1 << 10))
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    spec = JobSpec.model_validate({"input": {"uri": f"file://{tmp_path / 'corpus'}/"}, "long_documents": {"mode": "truncate"}})
    status = run_job_locally(ctx, spec)
    assert status.status.value == "partially_succeeded"
    planning_keys = list(ctx.store.list(JobHandle.bind(ctx, status.id).layout.planning_prefix))
    assert not [key for key in planning_keys if key.endswith((".ids.tsv", ".skips.npz"))]
    sections = len(PlanningLedger(ctx.store, JobHandle.bind(ctx, status.id).layout).sections())
    assert len([key for key in planning_keys if key.endswith(".cut.json")]) == sections > 6
