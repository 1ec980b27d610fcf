"""Parquet inputs in planning: sections are runs of whole row groups; a prefix of Parquet (and
JSONL) objects plans, in sections and in any order, what one simple pass over its rows decides;
shards name row runs and read back the same rows; carried columns keep their Arrow types."""
import datetime
import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from support.job_doubles import PLANNING, RecordingEnqueuer, drain, run_task

from poolq.jobs.inputs.shard_input import InputFields, ShardInput, read_shard_records
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import PlanningLedger
from poolq.jobs.planning.sections import _object_sections
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.submit import submit_job
from poolq.storage import LocalObjectStore, read_part
from poolq.worker.local_runner import local_context, run_job_locally


def _write(path, columns: dict, row_group_size: int) -> None:
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)


def test_sections_are_runs_of_whole_row_groups_covering_the_object(tmp_path):
    store = LocalObjectStore(tmp_path)
    _write(tmp_path / "t.parquet", {"id": list(range(100)), "text": [f"document {i}" for i in range(100)]}, 10)
    groups = pq.ParquetFile(tmp_path / "t.parquet").metadata
    group_bytes = groups.row_group(0).total_byte_size
    sections = _object_sections(store, "t.parquet", named=True, section_bytes=3 * group_bytes)
    assert [(s.start, s.end) for s in sections] == [(0, 30), (30, 60), (60, 90), (90, 100)]
    assert all(s.format == "parquet" and not s.whole and s.name.endswith("t.parquet") for s in sections)
    assert sum(s.size_bytes for s in sections) == sum(groups.row_group(i).total_byte_size for i in range(10))
    (whole,) = _object_sections(store, "t.parquet", named=False, section_bytes=1 << 30)
    assert whole.whole and (whole.start, whole.end) == (0, 100)
    pq.write_table(pa.table({"id": pa.array([], pa.int64()), "text": pa.array([], pa.string())}), tmp_path / "e.parquet")
    (empty,) = _object_sections(store, "e.parquet", named=False, section_bytes=1)
    assert (empty.start, empty.end, empty.whole) == (0, 0, True)


def _corpus(folder) -> dict[str, list[dict]]:
    """Four Parquet objects (integer ids, string ids, nulls, ids repeated within and across objects,
    a text column of integers) and a JSONL object among them, in key order."""
    rng = random.Random(5)
    a = [{"id": i, "text": None if i % 13 == 5 else f"row {i} " + "word " * rng.randrange(1, 20)} for i in range(150)]
    a[40]["id"] = 7  # repeats row 8's id
    b = [{"id": f"b{i}", "text": f"b text {i}"} for i in range(60)]
    b[3]["id"], b[9]["id"] = "12", None  # "12" repeats a's integer id 12, as text
    c = [{"id": f"c{i}", "text": f"c text {i}"} for i in range(40)]
    d = [{"id": "d0", "text": "a JSONL object in the same prefix"}, {"id": "b1", "text": "repeats b"}]
    e = [{"id": f"e{i}", "text": 100 + i} for i in range(3)]  # a text column that holds numbers
    folder.mkdir()
    _write(folder / "a.parquet", {"id": pa.array([r["id"] for r in a], pa.int64()), "text": [r["text"] for r in a]}, 16)
    _write(folder / "b.parquet", {"id": [r["id"] for r in b], "text": [r["text"] for r in b]}, 7)
    _write(folder / "c.parquet", {"id": [r["id"] for r in c], "text": [r["text"] for r in c]}, 40)
    (folder / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in d))
    _write(folder / "e.parquet", {"id": [r["id"] for r in e], "text": pa.array([r["text"] for r in e], pa.int64())}, 10)
    return {"a.parquet": a, "b.parquet": b, "c.parquet": c, "d.jsonl": d, "e.parquet": e}


def _oracle(corpus):
    """One simple pass: the records kept (object, id as text, row) and the erroneous (object, row)."""
    kept, errors, seen = [], set(), set()
    for name, rows in corpus.items():
        for number, row in enumerate(rows, start=1):
            text = row["text"] if isinstance(row["text"], str) else None
            if row["id"] is None or text is None or str(row["id"]) in seen:
                errors.add((name, number))
                continue
            seen.add(str(row["id"]))
            kept.append((name, str(row["id"]), number))
    return kept, errors


def _plan(tmp_path, folder, name, section_bytes, shuffle=None):
    ctx = local_context(tmp_path / name, Settings(plan_section_bytes=section_bytes, shard_max_documents=16))
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"uri": f"file://{folder}/"}})).id
    if shuffle is None:
        drain(ctx, only=PLANNING)
    else:
        rng = random.Random(shuffle)
        while runnable := [task for task in ctx.enqueuer.tasks if task[0] in PLANNING]:
            task = rng.choice(runnable)
            ctx.enqueuer.tasks.remove(task)
            run_task(task, ctx)
    return ctx, job_id


def _kept(ctx, job_id):
    plan, layout, kept = JobHandle.bind(ctx, job_id).ledger.plan(), JobHandle.bind(ctx, job_id).layout, []
    for shard in range(plan.num_shards):
        shard_input = ShardInput.from_bytes(ctx.store.get(layout.shard_input(*plan.shard_location(shard))))
        rows = read_shard_records(shard_input, InputFields(), ctx.settings.storage.s3_config())
        kept += [(shard_input.uri.rsplit("/", 1)[-1], row_id, row.line) for row_id, row in rows.items()]
    return kept


def _errors(ctx, job_id):
    return [json.loads(line) for line in ctx.store.get(JobHandle.bind(ctx, job_id).layout.plan_errors).splitlines()]


@pytest.mark.parametrize("section_bytes,shuffle", [(1 << 10, None), (1 << 10, 4), (2 << 10, 9)])
def test_a_parquet_prefix_in_sections_in_any_order_plans_what_one_pass_decides(tmp_path, section_bytes, shuffle):
    corpus = _corpus(tmp_path / "corpus")
    expected_kept, expected_errors = _oracle(corpus)
    ctx, job_id = _plan(tmp_path, tmp_path / "corpus", "small", section_bytes, shuffle)
    whole_ctx, whole_id = _plan(tmp_path, tmp_path / "corpus", "whole", 64 << 20)
    sections = PlanningLedger(ctx.store, JobHandle.bind(ctx, job_id).layout).sections()
    assert len(sections) > 6 and len(PlanningLedger(whole_ctx.store, JobHandle.bind(whole_ctx, whole_id).layout).sections()) == 5
    # Then every row is kept once, in input order, or is an error naming its object and row
    kept = sorted(_kept(ctx, job_id), key=lambda k: (list(corpus).index(k[0]), k[2]))
    assert kept == expected_kept
    errors = _errors(ctx, job_id)
    assert {(e["source"].rsplit("/", 1)[-1], e["line"]) for e in errors} == expected_errors
    assert all(e["message"].startswith(f"{e['source']}: {'line' if e['source'].endswith('.jsonl') else 'row'} {e['line']}")
               for e in errors)
    by_place = {(e["source"].rsplit("/", 1)[-1], e["line"]): e for e in errors}
    assert by_place[("a.parquet", 6)]["message"].endswith("row 6 (id '5'): field 'text' is null")
    assert by_place[("a.parquet", 41)]["code"] == "duplicate_id" and by_place[("b.parquet", 4)]["code"] == "duplicate_id"
    assert by_place[("b.parquet", 10)]["message"].endswith("row 10: field 'id' is null")
    assert by_place[("d.jsonl", 2)]["code"] == "duplicate_id"
    assert by_place[("e.parquet", 2)]["message"].endswith("row 2 (id 'e1'): field 'text' must be a string")
    # and the plan is the one-section-per-object plan's
    assert errors == _errors(whole_ctx, whole_id) and sorted(kept) == sorted(_kept(whole_ctx, whole_id))
    plan = JobHandle.bind(ctx, job_id).ledger.plan()
    assert (plan.total, plan.plan_errors) == (sum(len(rows) for rows in corpus.values()), len(expected_errors))


def test_a_shard_names_row_runs_and_no_text(tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    ctx, job_id = _plan(tmp_path, tmp_path / "corpus", "runs", 64 << 20)
    raw = ctx.store.get(JobHandle.bind(ctx, job_id).layout.shard_input(0, 0))
    shard = ShardInput.from_bytes(raw)
    assert shard.format == "parquet" and shard.records == [] and b"word" not in raw
    # rows 1-5 of a.parquet, then row 6 (a null text) ends the run; row indices, numbered from 1
    assert shard.runs == [(0, 5, 1), (6, 17, 7)] and shard.documents == 16
    rows = read_shard_records(shard, InputFields(), ctx.settings.storage.s3_config())
    assert rows["0"].text == corpus["a.parquet"][0]["text"] and rows["6"].line == 7


def test_a_replaced_parquet_object_is_not_read_as_the_planned_one(tmp_path):
    _corpus(tmp_path / "corpus")
    ctx, job_id = _plan(tmp_path, tmp_path / "corpus", "changed", 64 << 20)
    shard = ShardInput.from_bytes(ctx.store.get(JobHandle.bind(ctx, job_id).layout.shard_input(0, 0)))
    _write(tmp_path / "corpus" / "a.parquet", {"id": [1], "text": ["other"]}, 10)
    with pytest.raises(ValueError, match="was replaced after the job was planned"):
        read_shard_records(shard, InputFields(), ctx.settings.storage.s3_config())


def test_a_job_carries_parquet_columns_with_their_arrow_types(tmp_path, local_ctx, minilm_engine):
    # Given one Parquet object: an int32 id column, carried int32, timestamp and list<string> columns
    texts = [f"The river {word} runs past the mill." for word in ("slowly", "quickly", "quietly", "darkly", "wide")]
    stamps = [datetime.datetime(2024, 1, 1 + i, 12, 30) for i in range(5)]
    tags = [["a"], [], None, ["b", "c"], ["d"]]
    _write(tmp_path / "in.parquet", {"id": pa.array(range(10, 15), pa.int32()), "text": texts,
                                     "year": pa.array([2000 + i for i in range(5)], pa.int32()),
                                     "at": pa.array(stamps, pa.timestamp("ms")),
                                     "tags": pa.array(tags, pa.list_(pa.string()))}, 2)
    spec = JobSpec.model_validate({"input": {"uri": (tmp_path / "in.parquet").as_uri()},
                                   "output": {"include_fields": ["tags", "at", "year", "absent"]}})
    status = run_job_locally(local_ctx, spec)
    assert status.status is JobState.SUCCEEDED, status.error_samples
    manifest = json.loads(local_ctx.store.get(JobHandle.bind(local_ctx, status.id).layout.manifest))
    table = pa.concat_tables([read_part(local_ctx.store.get(part["key"])) for part in manifest["parts"]]).sort_by("id")
    # Then ids are text, the carried columns keep their types (a column no row has is a null string)
    assert table.column("id").to_pylist() == [str(i) for i in range(10, 15)]
    assert [table.schema.field(name).type for name in ("tags", "at", "year", "absent")] == [
        pa.list_(pa.string()), pa.timestamp("ms"), pa.int32(), pa.string()]
    assert table.column("tags").to_pylist() == tags and table.column("at").to_pylist() == stamps
    assert table.column("year").to_pylist() == [2000 + i for i in range(5)] and table.column("absent").null_count == 5
    vectors = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
    np.testing.assert_allclose(vectors, minilm_engine.embed(texts), atol=1e-6)


def test_every_chunk_row_of_a_parquet_row_carries_its_typed_fields(tmp_path, local_ctx):
    _write(tmp_path / "long.parquet", {"id": pa.array([1, 2], pa.int64()),
                                       "text": [" ".join(["The river runs past the mill."] * 40), "A short one."],
                                       "rank": pa.array([3, 4], pa.int8()),
                                       "at": pa.array([1_700_000_000_123_456_789, None], pa.timestamp("ns"))}, 10)
    spec = JobSpec.model_validate({"input": {"uri": (tmp_path / "long.parquet").as_uri()},
                                   "output": {"include_fields": ["rank", "at"]},
                                   "long_documents": {"mode": "naive_chunks", "chunk_tokens": 32}})
    status = run_job_locally(local_ctx, spec)
    assert status.status is JobState.SUCCEEDED, status.error_samples
    manifest = json.loads(local_ctx.store.get(JobHandle.bind(local_ctx, status.id).layout.manifest))
    table = pa.concat_tables([read_part(local_ctx.store.get(part["key"])) for part in manifest["parts"]])
    long_rows = table.filter(pc.equal(table.column("id"), "1"))
    assert long_rows.num_rows > 3 and set(long_rows.column("rank").to_pylist()) == {3}
    # a nanosecond timestamp (no Python datetime holds it) comes out to the nanosecond
    assert table.schema.field("at").type == pa.timestamp("ns") and table.schema.field("rank").type == pa.int8()
    assert set(long_rows.column("at").cast(pa.int64()).to_pylist()) == {1_700_000_000_123_456_789}


def test_carried_nanosecond_times_and_durations_keep_their_type_and_values(tmp_path, local_ctx):
    # Python's time and timedelta stop at microseconds: these stay Arrow's, to the nanosecond
    nanos = [1_000_000_123, 2_000_000_456]
    _write(tmp_path / "t.parquet", {"id": ["a", "b"], "text": ["The river runs.", "A short one."],
                                    "at": pa.array(nanos, pa.time64("ns")), "took": pa.array(nanos, pa.duration("ns"))}, 10)
    spec = JobSpec.model_validate({"input": {"uri": (tmp_path / "t.parquet").as_uri()},
                                   "output": {"include_fields": ["at", "took"]}})
    status = run_job_locally(local_ctx, spec)
    assert status.status is JobState.SUCCEEDED and status.counts.failed == 0, status.error_samples
    manifest = json.loads(local_ctx.store.get(JobHandle.bind(local_ctx, status.id).layout.manifest))
    table = pa.concat_tables([read_part(local_ctx.store.get(part["key"])) for part in manifest["parts"]]).sort_by("id")
    assert [table.schema.field(name).type for name in ("at", "took")] == [pa.time64("ns"), pa.duration("ns")]
    assert [table.column(name).cast(pa.int64()).to_pylist() for name in ("at", "took")] == [nanos, nanos]


def test_an_object_named_parquet_that_is_not_fails_the_job_naming_it(tmp_path, local_ctx):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.parquet").write_bytes(b'{"id": "a", "text": "JSONL under a Parquet name"}\n')
    status = run_job_locally(local_ctx, JobSpec.model_validate({"input": {"uri": (tmp_path / "in").as_uri() + "/"}}))
    assert status.status is JobState.FAILED and "a.parquet is named as Parquet but is not" in status.error
    assert "it looks like JSON lines: name it .jsonl" in status.error and status.counts.failed == 0, status


@pytest.mark.parametrize("columns, missing", [
    ({"id": ["a", "b"], "body": ["one", "two"]}, "text"),
    ({"key": ["a", "b"], "text": ["one", "two"]}, "id"),
])
def test_a_parquet_object_without_the_id_or_text_column_fails_the_job_once_naming_both(tmp_path, local_ctx, columns,
                                                                                        missing):
    folder = tmp_path / "in"
    folder.mkdir()
    _write(folder / "a.parquet", {"id": ["x"], "text": ["a good object first"]}, 1)
    _write(folder / "b.parquet", columns, 1)
    status = run_job_locally(local_ctx, JobSpec.model_validate({"input": {"uri": folder.as_uri() + "/"}}))
    # One failure of the job, naming the object and the column; not an error per row
    assert status.status is JobState.FAILED, status
    assert f"b.parquet has no column {missing!r}" in status.error and "MissingColumnError" in status.error
    assert status.counts.failed == 0 and status.errors_by_code == {} and status.error_samples == [], status


def test_a_score_jobs_parquet_object_needs_its_query_column_too(tmp_path, local_ctx):
    _write(tmp_path / "pairs.parquet", {"id": ["a"], "text": ["a passage"]}, 1)
    spec = JobSpec.model_validate({"input": {"uri": (tmp_path / "pairs.parquet").as_uri()}, "task": "score",
                                   "model": "all-MiniLM-L6-v2"})
    status = run_job_locally(local_ctx, spec)
    assert status.status is JobState.FAILED and "pairs.parquet has no column 'query'" in status.error, status


def test_an_object_whose_footer_does_not_parse_fails_the_job_naming_it(tmp_path, local_ctx):
    folder = tmp_path / "in"
    folder.mkdir()
    _write(folder / "a.parquet", {"id": ["a"], "text": ["a good object first"]}, 1)
    _write(folder / "b.parquet", {"id": ["b"], "text": ["its footer is garbage"]}, 1)
    raw = (folder / "b.parquet").read_bytes()
    footer = int.from_bytes(raw[-8:-4], "little")  # magic bytes and length intact: pyarrow raises OSError
    (folder / "b.parquet").write_bytes(raw[: len(raw) - 8 - footer] + b"\xff" * footer + raw[-8:])
    status = run_job_locally(local_ctx, JobSpec.model_validate({"input": {"uri": folder.as_uri() + "/"}}))
    assert status.status is JobState.FAILED and "b.parquet cannot be read as Parquet" in status.error, status


@pytest.mark.parametrize("name, include", [("text", None), ("n", ["n"])], ids=["text", "carried"])
def test_a_column_the_job_reads_named_twice_fails_the_job_naming_it(tmp_path, local_ctx, name, include):
    # pyarrow finds no column of a name two columns share: not missing, and never carried as nulls
    columns = {"id": ["a", "b"], "text": ["one", "two"], "n": [1, 2]}
    table = pa.Table.from_arrays([pa.array(values) for values in [*columns.values(), columns[name]]], names=[*columns, name])
    pq.write_table(table, tmp_path / "dup.parquet")
    spec = {"input": {"uri": (tmp_path / "dup.parquet").as_uri()}, "output": {"include_fields": include}}
    status = run_job_locally(local_ctx, JobSpec.model_validate(spec))
    assert status.status is JobState.FAILED and "AmbiguousColumnError" in status.error, status
    assert f"dup.parquet has 2 columns named {name!r}" in status.error and status.counts.failed == 0, status
