"""A whole job in process: plan -> shards -> finalize, on the local store."""
import json

import numpy as np

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.storage import read_embeddings
from poolq.worker.local_runner import run_job_locally


def _write_input(path, documents, extra_lines=b""):
    path.write_bytes(b"".join(json.dumps(d).encode() + b"\n" for d in documents) + extra_lines)
    return path.as_uri()


def _outputs(ctx, job_id):
    layout = JobHandle.bind(ctx, job_id).layout
    manifest = json.loads(ctx.store.get(layout.manifest))
    ids = []
    for part in manifest["parts"]:
        ids += read_embeddings(ctx.store.get(part["key"])).column("id").to_pylist()
    errors = [json.loads(line) for line in ctx.store.get(layout.errors).decode().splitlines()]
    return manifest, ids, errors


def test_every_record_lands_once_in_a_part_or_the_error_file(tmp_path, local_ctx, sample_documents):
    # Given the real corpus plus bad records: empty text, missing id, invalid UTF-8, duplicate id,
    # an id with a newline in it (it would forge a line in logs)
    docs = [{"id": d["id"], "text": d["text"]} for d in sample_documents[:10]]
    bad = (b'{"id": "empty", "text": "  "}\n{"text": "no id"}\n\xff\xfe{}\n' + json.dumps(docs[0]).encode() + b"\n"
           + b'{"id": "forged\\nERROR x", "text": "fine text"}\n')
    uri = _write_input(tmp_path / "in.jsonl", docs, bad)
    # When the job runs with truncation
    spec = JobSpec.model_validate({"input": {"uri": uri}, "long_documents": {"mode": "truncate"}})
    status = run_job_locally(local_ctx, spec)
    # Then it partially succeeds; every good id is in exactly one part; the 5 bad lines are errors
    assert status.status is JobState.PARTIALLY_SUCCEEDED
    manifest, ids, errors = _outputs(local_ctx, status.id)
    assert sorted(ids) == sorted(d["id"] for d in docs)
    assert [(e["line"], e["code"]) for e in errors] == [
        (11, "empty_text"), (12, "missing_id"), (13, "invalid_utf8"), (14, "duplicate_id"), (15, "invalid_id")]
    assert errors[-1]["message"] == "line 15: id 'forged\\nERROR x' contains control character U+000A at position 6"
    assert errors[0]["id"] == "empty" and errors[3]["id"] == docs[0]["id"]
    assert len(manifest["parts"]) == 3  # 10 documents, at most 4 per shard
    assert manifest["counts"] == {"total": 15, "completed": 10, "failed": 5, "not_processed": 0, "carried": 0, "rows": 10}
    assert (status.counts.total, status.counts.completed, status.counts.failed) == (15, 10, 5)
    assert status.usage.tokens == manifest["usage"]["tokens"] > 0


def test_error_mode_fails_long_documents_per_record(tmp_path, local_ctx, sample_documents):
    docs = [{"id": d["id"], "text": d["text"]} for d in sample_documents[:6]]
    spec = JobSpec.model_validate({"input": {"uri": _write_input(tmp_path / "in.jsonl", docs)}})
    status = run_job_locally(local_ctx, spec)
    manifest, ids, errors = _outputs(local_ctx, status.id)
    assert {e["code"] for e in errors} == {"document_too_long"}
    assert sorted(ids + [e["id"] for e in errors]) == sorted(d["id"] for d in docs)
    assert all("tokens; the model's window is 256" in e["message"] for e in errors)


def test_vectors_in_the_parts_equal_the_engines(tmp_path, local_ctx, minilm_engine, sample_documents):
    docs = [{"id": d["id"], "text": d["text"][:600]} for d in sample_documents[:5]]
    spec = JobSpec.model_validate({"input": {"uri": _write_input(tmp_path / "in.jsonl", docs)}})
    status = run_job_locally(local_ctx, spec)
    assert status.status is JobState.SUCCEEDED
    manifest, _, errors = _outputs(local_ctx, status.id)
    table = read_embeddings(local_ctx.store.get(manifest["parts"][0]["key"]))
    got = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
    expected = minilm_engine.embed([d["text"] for d in docs[:4]])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert errors == [] and manifest["dimensions"] == 384


def test_missing_input_fails_the_job_with_a_clear_error(tmp_path, local_ctx):
    spec = JobSpec.model_validate({"input": {"uri": (tmp_path / "absent.jsonl").as_uri()}})
    status = run_job_locally(local_ctx, spec)
    assert status.status is JobState.FAILED
    assert "absent.jsonl does not exist" in status.error


def test_chunk_modes_write_one_row_per_chunk_with_spans(tmp_path, local_ctx, sample_documents):
    docs = [{"id": d["id"], "text": d["text"]} for d in sample_documents[:3]]
    docs[1]["chunk_spans"] = [[0, 40], [40, 200]]
    spec = JobSpec.model_validate({"input": {"uri": _write_input(tmp_path / "in.jsonl", docs)},
                                   "long_documents": {"mode": "late_chunks", "chunk_tokens": 64}})
    status = run_job_locally(local_ctx, spec)
    assert status.status is JobState.SUCCEEDED, status.error
    manifest = json.loads(local_ctx.store.get(JobHandle.bind(local_ctx, status.id).layout.manifest))
    table = read_embeddings(local_ctx.store.get(manifest["parts"][0]["key"]))
    assert manifest["columns"] == table.schema.names == [
        "id", "embedding", "num_tokens", "truncated", "content_hash",
        "chunk_index", "token_start", "token_end", "char_start", "char_end", "split"]
    rows = table.to_pylist()
    # Counts are documents; the manifest also says how many rows (chunks) were written
    assert (status.counts.total, status.counts.completed) == (3, 3) and manifest["counts"]["rows"] == len(rows) > 3
    for doc in docs:
        mine = [r for r in rows if r["id"] == doc["id"]]
        assert [r["chunk_index"] for r in mine] == list(range(len(mine))) and len(mine) >= 2
        assert mine[0]["token_start"] == 0 and mine[-1]["token_end"] == mine[0]["num_tokens"]
        assert all(0 <= r["char_start"] < r["char_end"] <= len(doc["text"]) for r in mine)
    # chunk_spans given for one document apply to it only when chunk_by is 'spans'
    spans_spec = JobSpec.model_validate({"input": {"uri": _write_input(tmp_path / "in2.jsonl", [docs[1]])},
                                         "long_documents": {"mode": "naive_chunks", "chunk_by": "spans"}})
    status = run_job_locally(local_ctx, spans_spec)
    manifest = json.loads(local_ctx.store.get(JobHandle.bind(local_ctx, status.id).layout.manifest))
    rows = read_embeddings(local_ctx.store.get(manifest["parts"][0]["key"])).to_pylist()
    assert len(rows) == 2
    # A token belongs to the span holding its first character, so a span's end may move to a token end.
    assert rows[0]["char_start"] == 0 and rows[0]["char_end"] <= rows[1]["char_start"]
    assert 40 <= rows[1]["char_start"] < 200 and rows[1]["token_start"] == rows[0]["token_end"]


def test_bad_chunk_spans_are_per_record_errors(tmp_path, local_ctx):
    docs = [{"id": "a", "text": "some words here", "chunk_spans": "nope"},
            {"id": "b", "text": "more words", "chunk_spans": [[0, 4]]}]
    spec = JobSpec.model_validate({"input": {"uri": _write_input(tmp_path / "in.jsonl", docs)},
                                   "long_documents": {"mode": "naive_chunks", "chunk_by": "spans"}})
    status = run_job_locally(local_ctx, spec)
    _, ids, errors = _outputs(local_ctx, status.id)
    assert ids == ["b"] and [(e["id"], e["code"]) for e in errors] == [("a", "invalid_chunk_spans")]


def test_a_model_int8_refuses_fails_each_shard_with_the_reason_and_is_loaded_once(tmp_path, monkeypatch):
    # Given an int8 worker whose quality gate no model can pass, and a job of three one-document shards
    from poolq.engine import PoolingEngine
    from poolq.engine.models import int8_encoder
    from poolq.jobs.settings import Settings
    from poolq.worker.local_runner import local_context

    monkeypatch.setattr(int8_encoder, "MIN_COSINE", 1.0)
    loads = []
    real_load = PoolingEngine.from_pretrained.__func__
    monkeypatch.setattr(PoolingEngine, "from_pretrained",
                        classmethod(lambda cls, *a, **kw: loads.append(a[0]) or real_load(cls, *a, **kw)))
    ctx = local_context(tmp_path / "out", Settings(dtype="int8", shard_max_documents=1))
    documents = [{"id": f"doc-{i}", "text": f"document number {i}"} for i in range(3)]
    spec = JobSpec.model_validate({"input": {"uri": _write_input(tmp_path / "in.jsonl", documents)}})
    # When it runs
    status = run_job_locally(ctx, spec)
    # Then every record is an error naming the refusal, and the model was loaded (and calibrated) once
    manifest, ids, errors = _outputs(ctx, status.id)
    assert status.status is JobState.FAILED and ids == []
    assert sorted(error["id"] for error in errors) == ["doc-0", "doc-1", "doc-2"]
    assert all("Int8Refused" in error["message"] and "use dtype float32" in error["message"] for error in errors)
    assert loads == ["all-MiniLM-L6-v2"]


def test_naive_chunks_with_defaults_make_whole_window_rows_and_no_slivers(tmp_path, local_ctx, sample_documents):
    # Given the longest real speeches of the demo corpus, and naive_chunks with nothing else set
    docs = sorted(({"id": d["id"], "text": d["text"]} for d in sample_documents), key=lambda d: -len(d["text"]))[:6]
    spec = JobSpec.model_validate({"input": {"uri": _write_input(tmp_path / "in.jsonl", docs)},
                                   "long_documents": {"mode": "naive_chunks"}})
    status = run_job_locally(local_ctx, spec)
    assert status.status is JobState.SUCCEEDED, status.error
    manifest = json.loads(local_ctx.store.get(JobHandle.bind(local_ctx, status.id).layout.manifest))
    rows = [row for part in manifest["parts"] for row in read_embeddings(local_ctx.store.get(part["key"])).to_pylist()]
    # Then no row was split (a chunk is what a 256-token window holds besides [CLS] and [SEP]) and
    # none is a sliver: each is at least a quarter of the 254 tokens a chunk holds
    lengths = [row["token_end"] - row["token_start"] for row in rows]
    assert len(rows) > 6 * 5 and not any(row["split"] for row in rows), lengths
    assert min(lengths) * 4 >= 254 and max(lengths) <= 255, sorted(lengths)[:5]  # 255: the first row holds [CLS]


def test_every_per_record_error_says_its_line_and_id_and_what_is_wrong(tmp_path, local_ctx, sample_documents):
    # Given one good record and one of each per-record problem, planning's and the engine's
    good = {"id": "good", "text": "a short fine text"}
    lines = [json.dumps(good).encode(),
             json.dumps({"id": "blank", "text": " \n\t "}).encode(),
             json.dumps({"id": "long", "text": max((d["text"] for d in sample_documents), key=len)}).encode(),
             json.dumps({"id": "marks", "text": "\u0301\u0301\u0301"}).encode(),
             json.dumps({"id": "good", "text": "the same id again"}).encode(),
             b'{"id": "open", "text": "a quote never closed}',
             b'{"id": "comma" "text": "x"}']
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    # When the job runs with the defaults (long documents are errors)
    status = run_job_locally(local_ctx, JobSpec.model_validate({"input": {"uri": source.as_uri()}}))
    _, ids, errors = _outputs(local_ctx, status.id)
    messages = {error["line"]: error["message"] for error in errors}
    # Then each error begins with where it is: the line and, when the line has one, the id
    assert ids == ["good"] and sorted(messages) == [2, 3, 4, 5, 6, 7], messages
    assert messages[2] == "line 2 (id 'blank'): text is blank (only whitespace)"
    assert messages[3].startswith("line 3 (id 'long'): document has ") and messages[3].endswith(
        "the model's window is 256 (set long_documents.mode to 'truncate', 'chunked', 'naive_chunks' or 'late_chunks')")
    assert messages[4].startswith("line 4 (id 'marks'): the text has no tokens once tokenized")
    assert messages[5] == "line 5 (id 'good'): this id appeared before, at line 1"
    assert messages[6] == ("line 6: invalid JSON: unterminated string: the string opened at column 24 is not closed "
                           "before the line ends")
    assert messages[7] == "line 7: invalid JSON: missing comma at column 16: expected ',' or a closing bracket after a value"
    # And the status's samples are the same messages
    assert status.error_samples and all(sample in messages.values() for sample in status.error_samples)
