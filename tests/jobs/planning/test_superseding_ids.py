"""A superseding input (``input.supersede``): a later object's record replaces an earlier object's
with the same id; a repeat within one object is still a duplicate. Decided per partition."""
import json
import os
import random

import pytest
from support.job_doubles import PLANNING, RecordingEnqueuer, drain

from poolq.jobs.inputs.shard_input import InputFields, ShardInput, read_shard_records
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import PlanningLedger
from poolq.jobs.planning import id_partitions
from poolq.jobs.planning.id_partitions import IdPartitions
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context


def _decide(tmp_path, records, baseline, object_starts, partitions=1):
    ids = IdPartitions(tmp_path / "spill", partitions)
    for record_id, digest in records:
        ids.add_record(record_id, digest)
    for record_id, digest in baseline.items():
        ids.add_baseline(record_id, digest, part=0)
    decisions = ids.decide(object_starts)
    end = len(records)
    return decisions, {why: list(ids.positions(why, 0, end)) for why in ("duplicate", "superseded", "carried")}, ids


def test_the_latest_object_keeps_an_id_and_a_repeat_within_one_object_is_a_duplicate(tmp_path):
    # Given three objects: [x, y, x] [x, z] [y] (positions 0-2, 3-4, 5), and a baseline with
    # the second object's x and the first object's y
    records = [("x", "1"), ("y", "1"), ("x", "2"), ("x", "3"), ("z", "1"), ("y", "4")]
    decisions, left, ids = _decide(tmp_path, records, {"x": "3", "y": "1"}, object_starts=(0, 3, 5))
    # Then the first object's second x is its duplicate (naming position 0), its x and y are
    # superseded by the later objects', and only the x kept (position 3) is carried: the y kept is new
    assert left == {"duplicate": [2], "superseded": [0, 1], "carried": [3]}
    assert list(ids.first_positions(0, 6)) == [0]
    assert (decisions.duplicates, decisions.superseded, decisions.carried) == (1, 2, 1)
    assert [line.strip() for line in decisions.carried_by_part[0].open()] == ["x"]


def test_without_object_starts_every_repeat_is_a_duplicate_of_the_first(tmp_path):
    records = [("x", "1"), ("y", "1"), ("x", "2"), ("x", "3")]
    decisions, left, ids = _decide(tmp_path, records, {"x": "1"}, object_starts=(0,))
    assert left == {"duplicate": [2, 3], "superseded": [], "carried": [0]}
    assert list(ids.first_positions(0, 4)) == [0, 0] and decisions.superseded == 0


@pytest.mark.parametrize("partitions", [1, 7, 64])
def test_partitions_decide_what_one_set_decides(tmp_path, monkeypatch, partitions):
    monkeypatch.setattr(id_partitions, "POSITIONS_PER_RANGE", 50)  # many range files
    rng = random.Random(partitions)
    records = [(f"id-{rng.randrange(300)}", f"{rng.randrange(3):016x}") for _ in range(1000)]
    baseline = {f"id-{i}": f"{i % 3:016x}" for i in range(0, 300, 2)}
    object_starts = (0, 90, 91, 400, 401, 777)
    decisions, left, ids = _decide(tmp_path, records, baseline, object_starts, partitions)
    # One set: the latest object holding an id keeps its first record there
    object_of = lambda position: sum(start <= position for start in object_starts)  # noqa: E731
    kept: dict[str, int] = {}
    duplicates, firsts, superseded = [], [], []
    for position, (record_id, _) in enumerate(records):
        earlier = kept.get(record_id)
        if earlier is not None and object_of(earlier) == object_of(position):
            duplicates.append(position)
            firsts.append(earlier)
            continue
        if earlier is not None:
            superseded.append(earlier)
        kept[record_id] = position
    carried = sorted(at for record_id, at in kept.items() if baseline.get(record_id) == records[at][1])
    assert left == {"duplicate": duplicates, "superseded": sorted(superseded), "carried": carried}
    assert list(ids.first_positions(0, len(records))) == firsts
    assert (decisions.duplicates, decisions.superseded, decisions.carried) == (len(duplicates), len(superseded), len(carried))
    assert superseded and duplicates  # the draw has both


def test_a_job_over_a_prefix_may_supersede_too_reading_the_oldest_object_first(tmp_path):
    # Given a prefix whose newer object (by last-modified; its key sorts first) re-sends an id
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "b.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "text": f"text {i}"}) + "\n" for i in range(3)))
    (folder / "a.jsonl").write_text(json.dumps({"id": "d1", "text": "text 1, edited"}) + "\n")
    os.utime(folder / "b.jsonl", (1_000_000, 1_000_000))
    os.utime(folder / "a.jsonl", (2_000_000, 2_000_000))
    ctx = local_context(tmp_path / "out", Settings(plan_partition_bytes=1 << 16))
    ctx.enqueuer = RecordingEnqueuer()
    spec = JobSpec.model_validate({"input": {"uri": f"file://{folder}/", "supersede": True}})
    job = JobHandle.bind(ctx, submit_job(ctx, spec).id)
    # When it is planned
    drain(ctx, only=PLANNING)
    # Then the objects were read oldest first, nothing failed, the older d1 is left out, and the
    # total counts the corpus: 3 documents, the edited d1 among those to embed
    assert [section.uri.rsplit("/", 1)[-1] for section in PlanningLedger(ctx.store, job.layout).sections()] == [
        "b.jsonl", "a.jsonl"]
    plan = job.ledger.plan()
    assert (plan.total, plan.plan_errors, plan.superseded) == (3, 0, 1)
    shards = [ShardInput.from_bytes(ctx.store.get(job.layout.shard_input(*plan.shard_location(shard))))
              for shard in range(plan.num_shards)]
    texts = {record_id: record.text for shard in shards
             for record_id, record in read_shard_records(shard, InputFields(), ctx.settings.storage.s3_config()).items()}
    assert texts == {"d0": "text 0", "d1": "text 1, edited", "d2": "text 2"}
