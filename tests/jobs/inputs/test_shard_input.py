"""Shards name byte ranges of the input, not copies: the bucket holds the corpus once."""
import gzip
import json

from support.job_doubles import RecordingEnqueuer

from poolq.jobs.inputs.shard_input import InputFields, ShardInput, read_shard_records
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context, run_job_locally

LINES = [
    '{"id": "a", "text": "alpha document"}',
    "",
    '{"id": "b", "text": "beta document"}',
    '{"id": "c"}',  # no text: a planning error, it ends a run
    '{"id": "d", "text": "delta document"}',
    '{"id": "b", "text": "a duplicate id"}',  # ends a run too
    '{"id": "e", "text": "epsilon document"}',
]


def _write(path, lines, compress=False):
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return f"file://{path}"


def _ctx(tmp_path, **settings):
    ctx = local_context(tmp_path / "out", Settings(**settings))
    ctx.enqueuer = RecordingEnqueuer()
    return ctx


def _plan(ctx, uri) -> str:
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"uri": uri}})).id
    plan_job(JobHandle.bind(ctx, job_id))
    return job_id


def test_a_shard_names_runs_of_the_input_and_reads_back_the_same_records(tmp_path):
    ctx = _ctx(tmp_path)
    job_id = _plan(ctx, _write(tmp_path / "in.jsonl", LINES))
    raw = ctx.store.get(JobHandle.bind(ctx, job_id).layout.shard_input(0, 0))
    shard = ShardInput.from_bytes(raw)
    # No text is copied: the descriptor names three runs (a+blank+b, d, e) of the input
    assert b"alpha" not in raw and shard.records == [] and shard.documents == 4
    assert [line for _, _, line in shard.runs] == [1, 5, 7]
    rows = read_shard_records(shard, InputFields(), ctx.settings.storage.s3_config())
    assert {row_id: row.line for row_id, row in rows.items()} == {"a": 1, "b": 3, "d": 5, "e": 7}
    assert rows["d"].text == "delta document"


def test_the_whole_job_embeds_each_record_once_and_names_the_right_lines(tmp_path, minilm_engine):
    ctx = local_context(tmp_path / "out", Settings(shard_max_documents=2))
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    lines = [*LINES, '{"id": "f", "text": "' + "word " * 400 + '"}']  # over the window: error mode
    status = run_job_locally(ctx, JobSpec.model_validate({"input": {"uri": _write(tmp_path / "in.jsonl", lines)}}))
    manifest = JobHandle.bind(ctx, status.id).ledger.manifest()
    assert manifest.status is JobState.PARTIALLY_SUCCEEDED and manifest.counts.completed == 4
    errors = [json.loads(line) for line in ctx.store.get(manifest.errors.key).splitlines()]
    assert {(error["line"], error["code"]) for error in errors} == {
        (4, "missing_text"), (6, "duplicate_id"), (8, "document_too_long")}


def test_an_input_replaced_after_planning_fails_the_shard_saying_so(tmp_path, minilm_engine):
    ctx = _ctx(tmp_path)
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    path = tmp_path / "in.jsonl"
    job_id = _plan(ctx, _write(path, LINES))
    _write(path, [line.replace("document", "text!") for line in LINES] + ["{}"])  # replaced (other size and time)
    shard = ShardInput.from_bytes(ctx.store.get(JobHandle.bind(ctx, job_id).layout.shard_input(0, 0)))
    try:
        read_shard_records(shard, InputFields(), ctx.settings.storage.s3_config())
    except ValueError as exc:
        assert "was replaced after the job was planned" in str(exc)
    else:
        raise AssertionError("a replaced input was read as if it were the planned one")


def test_a_gzip_input_is_not_addressable_by_ranges_so_its_shards_hold_the_records(tmp_path):
    ctx = _ctx(tmp_path)
    job_id = _plan(ctx, _write(tmp_path / "in.jsonl.gz", LINES, compress=True))
    shard = ShardInput.from_bytes(ctx.store.get(JobHandle.bind(ctx, job_id).layout.shard_input(0, 0)))
    assert shard.runs == [] and [row.id for row in shard.records] == ["a", "b", "d", "e"]
    assert set(read_shard_records(shard, InputFields(), ctx.settings.storage.s3_config())) == {"a", "b", "d", "e"}
