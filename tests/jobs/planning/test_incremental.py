"""Incremental runs in process: unchanged documents are carried, not embedded again, and the new
run's output equals a full run's."""
import json
import re

import numpy as np
import pyarrow as pa
import pytest
from support.engine_doubles import CountingEngine

from poolq.engine.loading.registry import PACKAGED_MODELS
from poolq.jobs.inputs.content_hash import content_hash
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.planning.incremental import baseline_manifest
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import LOCAL_TENANT
from poolq.jobs.steps.submit import JobRejected
from poolq.storage import read_embeddings
from poolq.worker.local_runner import local_context, run_job_locally

MODEL = "all-MiniLM-L6-v2"


@pytest.fixture
def engine(local_ctx, minilm_engine):
    counting = CountingEngine(minilm_engine)
    local_ctx.engines.use(MODEL, counting)
    return counting


@pytest.fixture(scope="module")
def sentences(sample_documents):
    """Short real texts: sentences of the sample corpus."""
    found = [s.strip() for d in sample_documents for s in re.split(r"(?<=[.!?])\s+", d["text"])]
    return [s for s in found if 40 <= len(s) <= 300]


def _docs(sentences, n):
    return [{"id": f"doc-{i:03d}", "text": sentences[i]} for i in range(n)]


def _write(path, docs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path.as_uri()


def _edit(docs, indexes):
    return [{**d, "text": d["text"] + " (revised)"} if i in indexes else d for i, d in enumerate(docs)]


def _run(ctx, uri, incremental_from=None, **options):
    spec = JobSpec.model_validate({"input": {"uri": uri}, "incremental_from": incremental_from, **options})
    status = run_job_locally(ctx, spec)
    assert status.status is JobState.SUCCEEDED, status.error
    return status.id


def _manifest(ctx, job_id):
    return json.loads(ctx.store.get(JobHandle.bind(ctx, job_id).layout.manifest))


def _table(ctx, job_id) -> pa.Table:
    """All rows of the job, in (id, chunk) order."""
    tables = [read_embeddings(ctx.store.get(part["key"])) for part in _manifest(ctx, job_id)["parts"]]
    table = pa.concat_tables(tables)
    keys = [("id", "ascending")] + ([("chunk_index", "ascending")] if "chunk_index" in table.column_names else [])
    return table.sort_by(keys)


def _assert_same_output(ctx, job_a, job_b):
    a, b = _table(ctx, job_a), _table(ctx, job_b)
    assert a.schema == b.schema
    for column in a.column_names:
        if column != "embedding":
            assert a.column(column).to_pylist() == b.column(column).to_pylist(), column
    vectors = lambda t: np.stack(t.column("embedding").to_numpy(zero_copy_only=False))  # noqa: E731
    np.testing.assert_allclose(vectors(a), vectors(b), atol=1e-6)


def _comparable_counts(manifest):
    return {k: v for k, v in manifest["counts"].items() if k != "carried"}


def test_a_rerun_after_editing_3_documents_embeds_exactly_those_3(tmp_path, local_ctx, engine, sentences):
    # Given a full run over 20 documents
    docs = _docs(sentences, 20)
    first = _run(local_ctx, _write(tmp_path / "v1" / "in.jsonl", docs))
    assert sorted(engine.keys) == [d["id"] for d in docs]
    # When 3 documents are edited and the job runs again, incrementally from the first
    edited = _edit(docs, {2, 9, 17})
    uri = _write(tmp_path / "v2" / "in.jsonl", edited)
    engine.keys.clear()
    second = _run(local_ctx, uri, incremental_from=first)
    # Then the model saw exactly the 3 edited documents; 17 were carried
    assert sorted(engine.keys) == ["doc-002", "doc-009", "doc-017"]
    manifest = _manifest(local_ctx, second)
    assert manifest["counts"]["carried"] == 17 and manifest["options"]["incremental_from"] == first
    carried = [part for part in manifest["parts"] if "shard" not in part]
    assert [part["rows"] for part in carried] and sum(part["rows"] for part in carried) == 17
    assert all(re.search(r"/parts/carried-\d{5}\.parquet$", part["key"]) for part in carried)
    assert manifest["dimensions"] == 384
    assert manifest["columns"][:5] == ["id", "embedding", "num_tokens", "truncated", "content_hash"]
    # And its output and counts equal a from-scratch run over the edited input
    engine.keys.clear()
    fresh = _run(local_ctx, uri)
    assert len(engine.keys) == 20
    assert _comparable_counts(manifest) == _comparable_counts(_manifest(local_ctx, fresh))
    _assert_same_output(local_ctx, second, fresh)
    hashes = dict(zip(*[_table(local_ctx, second).column(c).to_pylist() for c in ("id", "content_hash")]))
    assert hashes == {d["id"]: content_hash(d["text"]) for d in edited}


def test_an_unchanged_rerun_embeds_nothing_and_still_lists_every_document(tmp_path, local_ctx, engine, sentences):
    uri = _write(tmp_path / "in.jsonl", _docs(sentences, 6))
    first = _run(local_ctx, uri)
    engine.keys.clear()
    second = _run(local_ctx, uri, incremental_from=first)
    assert engine.keys == []
    manifest = _manifest(local_ctx, second)
    assert manifest["shards"]["total"] == 0 and manifest["usage"]["tokens"] == 0
    assert manifest["counts"] == {**_manifest(local_ctx, first)["counts"], "carried": 6}
    assert manifest["dimensions"] == 384
    _assert_same_output(local_ctx, second, first)


def test_chunk_rows_are_carried_per_document_and_counts_match_a_full_run(tmp_path, local_ctx, engine, sample_documents):
    # Given long documents cut into several chunk rows each
    docs = [{"id": d["id"], "text": d["text"][:1500]} for d in sample_documents[:5]]
    options = {"long_documents": {"mode": "naive_chunks", "chunk_tokens": 64}}
    first = _run(local_ctx, _write(tmp_path / "v1.jsonl", docs), **options)
    # When one document changes
    uri = _write(tmp_path / "v2.jsonl", _edit(docs, {1}))
    engine.keys.clear()
    second = _run(local_ctx, uri, incremental_from=first, **options)
    # Then only it is embedded again; counts are documents, rows are chunks, as in a full run
    assert engine.keys == [docs[1]["id"]]
    manifest = _manifest(local_ctx, second)
    fresh = _run(local_ctx, uri, **options)
    assert manifest["counts"]["carried"] == 4 and manifest["counts"]["rows"] > manifest["counts"]["completed"] == 5
    assert _comparable_counts(manifest) == _comparable_counts(_manifest(local_ctx, fresh))
    _assert_same_output(local_ctx, second, fresh)


def test_other_options_or_model_carry_nothing(tmp_path, local_ctx, engine, sentences):
    uri = _write(tmp_path / "in.jsonl", _docs(sentences, 5))
    first = _run(local_ctx, uri)
    # A different option: everything is embedded again
    engine.keys.clear()
    second = _run(local_ctx, uri, incremental_from=first, long_documents={"mode": "truncate"})
    assert len(engine.keys) == 5 and _manifest(local_ctx, second)["counts"]["carried"] == 0
    # A different model (the earlier manifest as another model would have written it): no baseline
    same_spec = JobSpec.model_validate({"input": {"uri": uri}, "incremental_from": first})
    assert baseline_manifest(local_ctx, same_spec, LOCAL_TENANT) is not None
    key = JobHandle.bind(local_ctx, first).layout.manifest
    local_ctx.store.put(key, json.dumps({**_manifest(local_ctx, first), "model": "smollm2-135m"}).encode())
    assert baseline_manifest(local_ctx, same_spec, LOCAL_TENANT) is None


def _worker(tmp_path, minilm_engine, **settings):
    """A fresh worker process's context on the shared store, serving model "mini" from ``tmp_path/mini``."""
    ctx = local_context(tmp_path / "out", Settings(models={"mini": str(tmp_path / "mini")}, **settings))
    counting = CountingEngine(minilm_engine)
    ctx.engines.use("mini", counting)
    return ctx, counting


def test_new_model_files_under_the_same_name_or_another_dtype_carry_nothing(tmp_path, minilm_engine, sentences):
    # Given model "mini": a directory of MiniLM's files (links), and a full run with it
    mini = tmp_path / "mini"
    mini.mkdir()
    for file in PACKAGED_MODELS[MODEL].location().iterdir():
        (mini / file.name).symlink_to(file, target_is_directory=file.is_dir())
    ctx, engine = _worker(tmp_path, minilm_engine)
    uri = _write(tmp_path / "in.jsonl", _docs(sentences, 5))
    first = _run(ctx, uri, model="mini")
    assert _manifest(ctx, first)["engines"] == [ctx.engines.identity("mini")] and len(engine.keys) == 5
    # When an operator puts new files behind the name, and a restarted worker runs incrementally
    readme = mini / "README.md"
    readme.unlink()
    readme.write_text("fine-tuned on our corpus\n")
    ctx, engine = _worker(tmp_path, minilm_engine)
    second = _run(ctx, uri, model="mini", incremental_from=first)
    # Then nothing is carried: every document is embedded by the model as it is now
    assert len(engine.keys) == 5 and _manifest(ctx, second)["counts"]["carried"] == 0
    assert _manifest(ctx, second)["engines"] != _manifest(ctx, first)["engines"]
    # And the same files again: everything is carried; another compute dtype: nothing is
    ctx, engine = _worker(tmp_path, minilm_engine)
    assert _manifest(ctx, _run(ctx, uri, model="mini", incremental_from=second))["counts"]["carried"] == 5
    ctx, engine = _worker(tmp_path, minilm_engine, dtype="bfloat16")  # the fp32 engine handed in serves fp32 only
    third = _run(ctx, uri, model="mini", incremental_from=second)
    assert _manifest(ctx, third)["counts"]["carried"] == 0 and _manifest(ctx, third)["engines"][0].endswith("/bfloat16")
    assert ctx.engines.get("mini").config.dtype == "bfloat16"  # loaded by the worker, in its dtype


def test_an_unusable_baseline_means_a_full_run(tmp_path, local_ctx, engine, sentences):
    # A job id that does not exist (or is another tenant's) is refused at submit, naming the field
    uri = _write(tmp_path / "in.jsonl", _docs(sentences, 5))
    with pytest.raises(JobRejected) as rejected:
        _run(local_ctx, uri, incremental_from="0" * 32)
    assert rejected.value.field == "incremental_from" and not engine.keys
    job = _run(local_ctx, uri)
    assert len(engine.keys) == 5 and _manifest(local_ctx, job)["counts"] == {
        "total": 5, "completed": 5, "failed": 0, "not_processed": 0, "carried": 0, "rows": 5}
    # A finished job whose output was deleted since: the same
    local_ctx.store.delete(_manifest(local_ctx, job)["parts"][0]["key"])
    engine.keys.clear()
    again = _run(local_ctx, uri, incremental_from=job)
    assert len(engine.keys) == 5 and _manifest(local_ctx, again)["counts"]["carried"] == 0


def test_a_document_whose_carried_fields_changed_is_embedded_again_with_its_new_values(tmp_path, local_ctx, engine,
                                                                                      sentences):
    # Given a run carrying a string, a number and a JSON field into its rows
    spec = {"output": {"include_fields": ["title", "score", "tags"]}}
    docs = [{**d, "title": f"title {i}", "score": i + 0.5, "tags": {"n": [i]}} for i, d in enumerate(_docs(sentences, 6))]
    first = _run(local_ctx, _write(tmp_path / "v1" / "in.jsonl", docs), **spec)
    # When the texts stay but doc 1's title, doc 3's score and doc 4's tags change (and doc 5 loses its title)
    edited = [dict(d) for d in docs]
    edited[1]["title"], edited[3]["score"], edited[4]["tags"] = "a new title", 9.25, {"n": [4, 4]}
    del edited[5]["title"]
    uri = _write(tmp_path / "v2" / "in.jsonl", edited)
    engine.keys.clear()
    second = _run(local_ctx, uri, incremental_from=first, **spec)
    # Then exactly those are embedded again; the others, fields and all the same, are carried
    assert sorted(engine.keys) == ["doc-001", "doc-003", "doc-004", "doc-005"]
    assert _manifest(local_ctx, second)["counts"]["carried"] == 2
    # And the rows (the fields' new values included) equal a fresh run's over the edited input
    fresh = _run(local_ctx, uri, **spec)
    _assert_same_output(local_ctx, second, fresh)
    assert _table(local_ctx, second).column("title").to_pylist()[1] == "a new title"


def test_a_baseline_part_gone_after_the_first_embeds_every_document_again(tmp_path, local_ctx, engine, sentences):
    # Given a finished run of two parts (4 documents a shard), whose second part was deleted since
    uri = _write(tmp_path / "in.jsonl", _docs(sentences, 6))
    job = _run(local_ctx, uri)
    parts = _manifest(local_ctx, job)["parts"]
    assert len(parts) == 2
    local_ctx.store.delete(parts[1]["key"])
    # When the job runs again, incrementally from it
    engine.keys.clear()
    again = _run(local_ctx, uri, incremental_from=job)
    # Then nothing is carried (the first part's ids, read before the second was missed, are
    # forgotten): every document is embedded and listed, none left out as carried
    manifest = _manifest(local_ctx, again)
    assert sorted(engine.keys) == [f"doc-{i:03d}" for i in range(6)]
    assert manifest["counts"]["carried"] == 0 and manifest["counts"]["completed"] == 6
    assert _table(local_ctx, again).column("id").to_pylist() == [f"doc-{i:03d}" for i in range(6)]


def test_a_prefix_input_reads_every_jsonl_object_in_key_order(tmp_path, local_ctx, engine, sentences):
    # Given three objects under a prefix (and one that is not JSONL), one with a bad line
    docs = _docs(sentences, 9)
    _write(tmp_path / "in" / "b.jsonl", docs[3:6])
    _write(tmp_path / "in" / "a.jsonl", docs[:3])
    _write(tmp_path / "in" / "sub" / "c.jsonl", docs[6:])
    (tmp_path / "in" / "notes.txt").write_text("not an input\n")
    with (tmp_path / "in" / "b.jsonl").open("a") as handle:
        handle.write("{broken\n")
    prefix = (tmp_path / "in").as_uri() + "/"
    spec = JobSpec.model_validate({"input": {"uri": prefix}})
    status = run_job_locally(local_ctx, spec)
    # Then every document is embedded, in key order, and the error names its object and line
    assert status.status is JobState.PARTIALLY_SUCCEEDED and status.counts.total == 10
    assert engine.keys == [d["id"] for d in docs]
    errors_key = JobHandle.bind(local_ctx, status.id).layout.errors
    errors = [json.loads(line) for line in local_ctx.store.get(errors_key).decode().splitlines()]
    assert len(errors) == 1 and errors[0]["line"] == 4 and errors[0]["code"] == "invalid_json"
    assert errors[0]["source"].endswith("/in/b.jsonl") and errors[0]["message"].startswith(errors[0]["source"] + ": line 4:")
    # And an incremental rerun after editing one object embeds only its edited document
    _write(tmp_path / "in" / "sub" / "c.jsonl", _edit(docs[6:], {0}))
    engine.keys.clear()
    rerun = run_job_locally(local_ctx, JobSpec.model_validate({"input": {"uri": prefix}, "incremental_from": status.id}))
    assert engine.keys == ["doc-006"] and rerun.counts.completed == 9


def test_an_empty_prefix_fails_the_job_saying_so(tmp_path, local_ctx):
    (tmp_path / "empty").mkdir()
    status = run_job_locally(local_ctx, JobSpec.model_validate({"input": {"uri": (tmp_path / "empty").as_uri() + "/"}}))
    assert status.status is JobState.FAILED and "holds no *.jsonl, *.jsonl.gz or *.parquet objects" in status.error


def test_parquet_fields_in_nanoseconds_are_carried_unchanged(local_ctx, engine, tmp_path):
    """A time64[ns] or duration[ns] value has no Python type: its baseline row keys as the input row
    does (both read as Arrow's own scalars), so the run carries it; its key raised, failing the run."""
    import pyarrow.parquet as pq

    table = pa.table({"id": ["a", "b"], "text": ["one document here", "another document"],
                      "at": pa.array([1_000, 2_000], pa.time64("ns")), "took": pa.array([5, 6], pa.duration("ns"))})
    path = tmp_path / "in.parquet"
    pq.write_table(table, path)
    options = {"output": {"include_fields": ["at", "took"]}}
    first = _run(local_ctx, path.as_uri(), **options)
    second = _run(local_ctx, path.as_uri(), incremental_from=first, **options)
    manifest = JobHandle.bind(local_ctx, second).ledger.manifest()
    assert manifest.counts.carried == 2 and manifest.usage.tokens == 0
    carried = pa.concat_tables(read_embeddings(local_ctx.store.get(part.key)) for part in manifest.parts)
    assert carried.schema.field("at").type == pa.time64("ns") and carried.column("took").equals(table.column("took"))
