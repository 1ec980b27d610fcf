"""Duplicate ids and unchanged documents, decided per partition, equal what one set would decide."""
import json
import random

import pytest
from support.job_doubles import PLANNING, RecordingEnqueuer, drain

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import PlanningLedger
from poolq.jobs.planning import id_partitions
from poolq.jobs.planning.id_partitions import IdPartitions
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context


@pytest.mark.parametrize("partitions", [1, 7, 64])
def test_partitions_find_exactly_the_repeats_and_the_unchanged(tmp_path, monkeypatch, partitions):
    monkeypatch.setattr(id_partitions, "POSITIONS_PER_RANGE", 50)  # many range files
    rng = random.Random(partitions)
    records = [(f"id-{rng.randrange(300)}", f"{rng.randrange(3):016x}") for _ in range(1000)]
    baseline = {f"id-{i}": f"{i % 3:016x}" for i in range(0, 300, 2)}
    # Given the records and a baseline spilled into the partitions
    ids = IdPartitions(tmp_path / "spill", partitions)
    for record_id, digest in records:
        ids.add_record(record_id, digest)
    for record_id, digest in baseline.items():
        ids.add_baseline(record_id, digest, part=int(record_id.split("-")[1]) % 4)
    decisions = ids.decide()
    # (asked for in two ranges, as two sections would)
    duplicates = [*ids.positions("duplicate", 0, 420), *ids.positions("duplicate", 420, len(records))]
    carried = [*ids.positions("carried", 0, 420), *ids.positions("carried", 420, len(records))]
    # Then they equal what a single set decides
    firsts = [*ids.first_positions(0, 420), *ids.first_positions(420, len(records))]
    seen: dict[str, int] = {}
    expected_dups, expected_firsts, expected_carried = [], [], []
    for position, (record_id, digest) in enumerate(records):
        if record_id in seen:
            expected_dups.append(position)
            expected_firsts.append(seen[record_id])
            continue
        seen[record_id] = position
        if baseline.get(record_id) == digest:
            expected_carried.append(position)
    assert duplicates == expected_dups and decisions.duplicates == len(expected_dups)
    assert firsts == expected_firsts  # each duplicate knows where its id first appeared
    assert carried == expected_carried and decisions.carried == len(expected_carried)
    carried_ids = {line.strip() for path in decisions.carried_by_part.values() for line in path.open()}
    assert carried_ids == {records[position][0] for position in expected_carried}


def test_a_discarded_baseline_carries_nothing_whether_flushed_or_pending(tmp_path, monkeypatch):
    # Given a baseline spilled in part to disk (a tiny flush size) and in part still pending
    monkeypatch.setattr("poolq.jobs.inputs.spill_files.FLUSH_BYTES", 200)
    ids = IdPartitions(tmp_path / "spill", 4)
    for i in range(20):
        ids.add_record(f"id-{i}", f"{i:016x}")
        ids.add_baseline(f"id-{i}", f"{i:016x}", part=0)
    assert list((tmp_path / "spill").glob("baseline-*.tsv"))  # some of it was written
    # When it is discarded, then no record is carried, and the records are decided as before
    ids.discard_baseline()
    decisions = ids.decide()
    assert (decisions.carried, decisions.carried_by_part) == (0, {})
    assert list(ids.positions("carried", 0, 20)) == [] and decisions.duplicates == 0


def test_duplicate_ids_across_two_input_objects_are_reported_naming_the_second(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "text": f"text {i}"}) + "\n" for i in range(5)))
    second = [{"id": "d3", "text": "again"}, {"id": "x", "text": "new"}]
    (folder / "b.jsonl").write_text("".join(json.dumps(d) + "\n" for d in second))
    ctx = local_context(tmp_path / "out", Settings(plan_partition_bytes=1 << 16))
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"uri": f"file://{folder}/"}})).id
    # When it is planned (two objects: two sections, each scanned and cut by its own task)
    drain(ctx, only=PLANNING)
    plan = JobHandle.bind(ctx, job_id).ledger.plan()
    errors = [json.loads(line) for line in ctx.store.get(JobHandle.bind(ctx, job_id).layout.plan_errors).splitlines()]
    assert (plan.total, plan.plan_errors) == (7, 1)
    assert [(e["code"], e["id"], e["line"]) for e in errors] == [("duplicate_id", "d3", 1)]
    assert errors[0]["source"].endswith("/b.jsonl") and "b.jsonl: line 1" in errors[0]["message"]
    # naming where the id first appeared: the other object, and its line
    assert errors[0]["message"].endswith(f"this id appeared before, at file://{folder}/a.jsonl: line 4"), errors[0]



def test_a_duplicate_in_a_later_section_of_one_object_names_the_first_line(tmp_path):
    # Given one JSONL object cut into several sections, its last line repeating the id of line 3
    lines = [{"id": f"d{i}", "text": f"text number {i} " + "x" * 200} for i in range(1, 60)] + [{"id": "d3", "text": "again"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines))
    ctx = local_context(tmp_path / "out", Settings(plan_section_bytes=2048))
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"uri": (tmp_path / "in.jsonl").as_uri()}})).id
    drain(ctx, only=PLANNING)
    errors = [json.loads(line) for line in ctx.store.get(JobHandle.bind(ctx, job_id).layout.plan_errors).splitlines()]
    assert [(e["code"], e["line"]) for e in errors] == [("duplicate_id", 60)]
    assert errors[0]["message"] == "line 60 (id 'd3'): this id appeared before, at line 3"
    assert len(PlanningLedger(ctx.store, JobHandle.bind(ctx, job_id).layout).sections()) > 3  # several sections
