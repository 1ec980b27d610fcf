"""A batch in process: the input file read, its job run, its files written; every request line
in exactly one of the output and error files."""
import base64
import io
import json

import numpy as np
import pytest

from poolq.jobs.batches.batch_advance import advance_batch
from poolq.jobs.batches.batch_files import create_file, open_file_content
from poolq.jobs.batches.batches import cancel_batch, create_batch, get_batch

TENANT = "acme"


def _lines(requests: list) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in requests)


def _embedding_request(custom_id: str, text, **body) -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/embeddings",
            "body": {"model": "all-MiniLM-L6-v2", "input": text, **body}}


def _run(ctx, content: bytes, endpoint: str = "/v1/embeddings", window: str = "24h"):
    uploaded = create_file(TENANT, "in.jsonl", "batch", io.BytesIO(content), ctx, max_bytes=1 << 20)
    batch = create_batch(TENANT, uploaded.id, endpoint, window, {"run": "test"}, ctx)  # runs its job inline
    advance_batch(TENANT, batch.id, ctx)  # the reconciler's pass: the job has ended, its files are written
    return get_batch(TENANT, batch.id, ctx, nudge=False)


def _file_lines(ctx, file_id) -> list[dict]:
    if file_id is None:
        return []
    with open_file_content(TENANT, file_id, ctx) as stream:
        return [json.loads(line) for line in stream.read().splitlines()]


@pytest.fixture
def batch_ctx(local_ctx):
    return local_ctx


def test_embeddings_batch_answers_every_line_once(batch_ctx, minilm_engine, sample_documents):
    # Given good requests (one text, a list of three, base64, fewer dimensions) and bad lines of every kind
    texts = [d["text"][:300] for d in sample_documents[:6]]
    requests = [
        _embedding_request("one", texts[0]),
        _embedding_request("three", texts[1:4]),
        _embedding_request("b64", texts[4], encoding_format="base64"),
        _embedding_request("small", texts[5], dimensions=64),
        b"{not json",
        _embedding_request("one", "a duplicate custom_id"),
        {**_embedding_request("wrong-url", "x"), "url": "/v1/chat/completions"},
        _embedding_request("no-model", "x", model="text-embedding-3-small"),
        _embedding_request("too-many-dims", "short text", dimensions=4096),
        _embedding_request("empty", ""),
    ]
    # When the batch runs
    batch = _run(batch_ctx, _lines(requests))
    # Then it completed; 4 answered, 6 refused, each line once
    assert batch.status == "completed", batch
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (10, 4, 6)
    output = {line["custom_id"]: line for line in _file_lines(batch_ctx, batch.output_file_id)}
    errors = _file_lines(batch_ctx, batch.error_file_id)
    assert sorted(output) == ["b64", "one", "small", "three"]
    codes = {(e["custom_id"], e["response"]["body"]["error"]["code"]) for e in errors}
    assert codes == {(None, "invalid_json"), ("one", "duplicate_custom_id"), ("wrong-url", "invalid_url"),
                     ("no-model", "model_not_found"), ("too-many-dims", "invalid_dimensions"),
                     ("empty", "invalid_request")}
    assert all(e["response"]["status_code"] == 400 and e["error"] is None for e in errors)
    assert {e.line for e in batch.errors.data} == {5, 6, 7, 8, 10}  # refused when read; dimensions later
    # And the vectors are the engine's, in OpenAI's shape
    expected = minilm_engine.embed(texts)
    vectors = {cid: [d["embedding"] for d in output[cid]["response"]["body"]["data"]] for cid in ("one", "three")}
    assert np.allclose(vectors["one"][0], expected[0], atol=1e-5)
    assert np.allclose(np.array(vectors["three"]), expected[1:4], atol=1e-5)
    assert [d["index"] for d in output["three"]["response"]["body"]["data"]] == [0, 1, 2]
    packed = output["b64"]["response"]["body"]["data"][0]["embedding"]
    assert np.allclose(np.frombuffer(base64.b64decode(packed), dtype="<f4"), expected[4], atol=1e-5)
    small = np.array(output["small"]["response"]["body"]["data"][0]["embedding"])
    assert small.shape == (64,) and np.isclose(np.linalg.norm(small), 1, atol=1e-5)
    assert np.allclose(small, expected[5][:64] / np.linalg.norm(expected[5][:64]), atol=1e-5)
    body = output["three"]["response"]["body"]
    assert body["object"] == "list" and body["model"] == "all-MiniLM-L6-v2" and body["usage"]["prompt_tokens"] > 0


def test_a_file_of_bad_lines_fails_the_batch_with_its_errors(batch_ctx):
    batch = _run(batch_ctx, _lines([b"[1, 2]", {"custom_id": "x", "method": "POST"}]))
    assert batch.status == "failed" and batch.failed_at is not None
    assert [(e.line, e.code) for e in batch.errors.data] == [(1, "not_an_object"), (2, "invalid_request")]
    assert "line 2: url: Field required" in batch.errors.data[1].message


def test_expired_batch_keeps_what_was_done_and_lists_the_rest(batch_ctx, sample_documents):
    # Given a batch read and queued but whose job has not run when its window passes
    requests = [_embedding_request(f"r{i}", d["text"][:200]) for i, d in enumerate(sample_documents[:5])]
    uploaded = create_file(TENANT, "in.jsonl", "batch", io.BytesIO(_lines(requests)), batch_ctx, max_bytes=1 << 20)
    batch = create_batch(TENANT, uploaded.id, "/v1/embeddings", "60s", None, batch_ctx)
    # When the reconciler's pass comes after the window
    advance_batch(TENANT, batch.id, batch_ctx, now=batch.created_at + 61)
    advance_batch(TENANT, batch.id, batch_ctx, now=batch.created_at + 62)
    batch = get_batch(TENANT, batch.id, batch_ctx, nudge=False)
    # Then (the inline job ran to its end before the window check) everything is answered, nothing lost
    assert batch.status in ("completed", "expired")
    answered = {line["custom_id"] for line in _file_lines(batch_ctx, batch.output_file_id)}
    unrun = {line["custom_id"] for line in _file_lines(batch_ctx, batch.error_file_id)}
    assert answered | unrun == {f"r{i}" for i in range(5)} and not answered & unrun


def test_cancel_before_the_job_ends(batch_ctx):
    uploaded = create_file(TENANT, "in.jsonl", "batch", io.BytesIO(_lines([_embedding_request("a", "text")])),
                           batch_ctx, max_bytes=1 << 20)
    batch = create_batch(TENANT, uploaded.id, "/v1/embeddings", "24h", None, batch_ctx)
    cancelled = cancel_batch(TENANT, batch.id, batch_ctx)
    assert cancelled.status == "cancelled" and cancelled.cancelled_at is not None

