"""A batch in process: the input file read, its job run, its files written; every request line
in exactly one of the output and error files."""
import base64
import io
import json

import numpy as np
import pytest
from support.job_doubles import PLANNING, RecordingEnqueuer, drain, run_task

from poolq.products.batches.batch_advance import advance_batch
from poolq.products.batches.batch_files import create_file, open_file_content
from poolq.products.batches.batch_layout import BatchLayout
from poolq.products.batches.batch_records import BatchRecords
from poolq.products.batches.batches import BatchAlreadyEnded, cancel_batch, create_batch, get_batch

TENANT = "acme"


def _lines(requests: list) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in requests)


def _embedding_request(custom_id: str, text, **body) -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/embeddings",
            "body": {"model": "all-MiniLM-L6-v2", "input": text, **body}}


def _run(ctx, content: bytes, endpoint: str = "/v1/embeddings", window: str = "24h"):
    uploaded = create_file(ctx, TENANT, "in.jsonl", "batch", io.BytesIO(content), max_bytes=1 << 20)
    batch = create_batch(ctx, TENANT, uploaded.id, endpoint, window, {"run": "test"})  # runs its job inline
    advance_batch(ctx, TENANT, batch.id)  # the reconciler's pass: the job has ended, its files are written
    return get_batch(ctx, TENANT, batch.id, nudge=False)


def _file_lines(ctx, file_id) -> list[dict]:
    if file_id is None:
        return []
    with open_file_content(ctx, TENANT, file_id) as stream:
        return [json.loads(line) for line in stream.read().splitlines()]


@pytest.fixture
def batch_ctx(local_ctx):
    return local_ctx


def test_embeddings_batch_answers_every_line_once(batch_ctx, minilm_engine, sample_documents, long_documents):
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
        _embedding_request("long", long_documents[0]["text"]),  # over the window: refused, like OpenAI
        _embedding_request("one-long", [texts[0], long_documents[1]["text"]]),  # one input fails the request
        _embedding_request("truncated", long_documents[0]["text"], poolq={"long_documents": {"mode": "truncate"}}),
    ]
    # When the batch runs
    batch = _run(batch_ctx, _lines(requests))
    # Then it completed; 4 answered, 9 refused, each line once
    assert batch.status == "completed", batch
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (13, 4, 9)
    output = {line["custom_id"]: line for line in _file_lines(batch_ctx, batch.output_file_id)}
    errors = _file_lines(batch_ctx, batch.error_file_id)
    assert sorted(output) == ["b64", "one", "small", "three"]
    codes = {(e["custom_id"], e["response"]["body"]["error"]["code"]) for e in errors}
    assert codes == {(None, "invalid_json"), ("one", "duplicate_custom_id"), ("wrong-url", "invalid_url"),
                     ("no-model", "model_not_found"), ("too-many-dims", "invalid_dimensions"),
                     ("empty", "invalid_request"), ("long", "document_too_long"), ("one-long", "document_too_long"),
                     ("truncated", "mismatched_options")}
    assert all(e["response"]["status_code"] == 400 and e["error"] is None for e in errors)
    too_long = next(e for e in errors if e["custom_id"] == "one-long")["response"]["body"]["error"]["message"]
    assert too_long.startswith("line 12: input 1: ") and "tokens" in too_long and "(id" not in too_long
    # its hint names only what a batch takes, where a batch sets it (naive/late chunks make rows, not one result)
    assert too_long.endswith("(set poolq.long_documents.mode to 'truncate' or 'chunked')"), too_long
    assert {e.line for e in batch.errors.data} == {5, 6, 7, 8, 10, 13}  # refused when read; the others in the job
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


def _held(local_ctx, requests: list, window: str = "24h"):
    """A batch whose steps are recorded, not run: each test runs them when it chooses."""
    local_ctx.enqueuer = RecordingEnqueuer()
    uploaded = create_file(local_ctx, TENANT, "in.jsonl", "batch", io.BytesIO(_lines(requests)), max_bytes=1 << 20)
    batch = create_batch(local_ctx, TENANT, uploaded.id, "/v1/embeddings", window, None)
    drain(local_ctx, only=frozenset({"batch"}))  # the input is read, the job submitted
    drain(local_ctx, only=PLANNING)  # and planned: one shard task per 4 documents, none run yet
    return batch


def _first_shard_then_the_rest(ctx) -> None:
    shards = [task for task in ctx.enqueuer.tasks if task[0] == "shard"]
    ctx.enqueuer.tasks.remove(shards[0])
    run_task(shards[0], ctx)


def test_expired_batch_keeps_what_was_done_and_lists_the_rest(local_ctx, sample_documents):
    # Given a batch of 10 requests whose job has run one shard (4 requests) when its window passes
    requests = [_embedding_request(f"r{i}", d["text"][:200]) for i, d in enumerate(sample_documents[:10])]
    batch = _held(local_ctx, requests, window="60s")
    _first_shard_then_the_rest(local_ctx)
    # When the next passes come after the window: the job is stopped, then the files written
    advance_batch(local_ctx, TENANT, batch.id, now=batch.created_at + 61)
    job_id = get_batch(local_ctx, TENANT, batch.id, nudge=False).poolq_job_id
    assert local_ctx.status.get(job_id).status.value == "cancelling"
    drain(local_ctx, only=frozenset({"shard", "finalize"}))
    advance_batch(local_ctx, TENANT, batch.id, now=batch.created_at + 62)
    batch = get_batch(local_ctx, TENANT, batch.id, nudge=False)
    # Then it expired: the 4 done are in the output file, the 6 others in the error file
    assert batch.status == "expired" and batch.expired_at == batch.created_at + 62
    answered = {line["custom_id"] for line in _file_lines(local_ctx, batch.output_file_id)}
    unrun = _file_lines(local_ctx, batch.error_file_id)
    assert answered == {"r0", "r1", "r2", "r3"}
    assert sorted(line["custom_id"] for line in unrun) == [f"r{i}" for i in range(4, 10)]
    assert {line["error"]["code"] for line in unrun} == {"batch_expired"} and all(not line["response"] for line in unrun)
    assert (batch.request_counts.completed, batch.request_counts.failed) == (4, 6)


def test_cancel_before_the_job_ends(local_ctx, sample_documents):
    requests = [_embedding_request(f"r{i}", d["text"][:200]) for i, d in enumerate(sample_documents[:10])]
    batch = _held(local_ctx, requests)
    _first_shard_then_the_rest(local_ctx)
    assert cancel_batch(local_ctx, TENANT, batch.id).status == "cancelling"
    drain(local_ctx, only=frozenset({"batch"}))  # the batch's step stops the job
    drain(local_ctx)  # its other shards see the cancel; it is finalized
    advance_batch(local_ctx, TENANT, batch.id)
    batch = get_batch(local_ctx, TENANT, batch.id, nudge=False)
    assert batch.status == "cancelled" and batch.cancelled_at is not None
    assert len(_file_lines(local_ctx, batch.output_file_id)) == 4
    assert {line["error"]["code"] for line in _file_lines(local_ctx, batch.error_file_id)} == {"batch_cancelled"}
    with pytest.raises(BatchAlreadyEnded):
        cancel_batch(local_ctx, TENANT, batch.id)


def test_a_cancel_before_the_input_is_read_ends_the_batch_with_no_files(local_ctx, sample_documents):
    local_ctx.enqueuer = RecordingEnqueuer()  # the batch's first step is recorded, not run
    requests = [_embedding_request(f"r{i}", d["text"][:200]) for i, d in enumerate(sample_documents[:4])]
    uploaded = create_file(local_ctx, TENANT, "in.jsonl", "batch", io.BytesIO(_lines(requests)), max_bytes=1 << 20)
    batch = create_batch(local_ctx, TENANT, uploaded.id, "/v1/embeddings", "24h", None)
    assert cancel_batch(local_ctx, TENANT, batch.id).status == "cancelling"
    drain(local_ctx, only=frozenset({"batch"}))  # its step finds the cancel before reading the input
    batch = get_batch(local_ctx, TENANT, batch.id, nudge=False)
    assert batch.status == "cancelled" and batch.poolq_job_id is None  # no job was submitted
    assert (batch.output_file_id, batch.error_file_id, batch.request_counts.total) == (None, None, 0)
    assert [task for task in local_ctx.enqueuer.tasks if task[0] == "plan"] == []


def test_a_retried_step_writes_the_same_files(local_ctx, sample_documents):
    # Given a finished batch whose result record is lost after its files were written (a crash)
    batch = _run(local_ctx, _lines([_embedding_request("a", sample_documents[0]["text"][:200]), b"bad"]))
    records = BatchRecords(local_ctx, BatchLayout(local_ctx.service_layout, TENANT), batch.id)
    before = {name: _file_lines(local_ctx, getattr(batch, name)) for name in ("output_file_id", "error_file_id")}
    local_ctx.store.delete(records.key("result.json"))
    # When the step runs again
    advance_batch(local_ctx, TENANT, batch.id)
    again = get_batch(local_ctx, TENANT, batch.id, nudge=False)
    # Then the same files, under the same ids
    assert (again.output_file_id, again.error_file_id) == (batch.output_file_id, batch.error_file_id)
    assert {name: _file_lines(local_ctx, getattr(again, name)) for name in before} == before


def test_a_step_that_keeps_failing_ends_the_batch_failed_but_an_outage_does_not(local_ctx, sample_documents,
                                                                               monkeypatch):
    from poolq.products.batches import batch_advance
    from poolq.storage import StorageError

    # Given a batch whose job has run, and whose files cannot be written (a bug)
    def broken_files(*args, **kwargs):
        raise ValueError("output line encoder crashed")

    monkeypatch.setattr(batch_advance, "write_batch_files", broken_files)
    uploaded = create_file(local_ctx, TENANT, "in.jsonl", "batch", io.BytesIO(_lines([_embedding_request("a", "text")])),
                           max_bytes=1 << 20)
    batch = create_batch(local_ctx, TENANT, uploaded.id, "/v1/embeddings", "24h", None)
    with pytest.raises(ValueError) as failed:
        advance_batch(local_ctx, TENANT, batch.id)
    # When the step fails for good, and a storage outage gives up besides
    for _ in range(batch_advance.MAX_STEP_FAILURES - 1):
        assert batch_advance.give_up_batch(local_ctx, TENANT, batch.id, failed.value) is None
        assert batch_advance.give_up_batch(local_ctx, TENANT, batch.id, StorageError("S3 down")) is None
    assert get_batch(local_ctx, TENANT, batch.id, nudge=False).status == "finalizing"
    ended = batch_advance.give_up_batch(local_ctx, TENANT, batch.id, failed.value)
    # Then the third failure of the step (outages not counted) ends it, saying why
    assert ended is not None and ended.status == "failed"
    view = get_batch(local_ctx, TENANT, batch.id, nudge=False)
    assert view.status == "failed" and view.output_file_id is None
    (error,) = view.errors.data
    assert error.code == "internal_error" and "failed 3 times" in error.message
    assert "ValueError: output line encoder crashed" in error.message


def test_score_batch_scores_each_pair_like_the_engine(batch_ctx, minilm_engine):
    # Given vLLM score bodies: one first text against two, and pairwise lists; a mismatched pair count
    requests = [
        {"custom_id": "broadcast", "method": "POST", "url": "/v1/score",
         "body": {"model": "all-MiniLM-L6-v2", "text_1": "a cat", "text_2": ["a kitten", "a tax form"]}},
        {"custom_id": "pairwise", "method": "POST", "url": "/v1/score",
         "body": {"model": "all-MiniLM-L6-v2", "text_1": ["rain", "sun"], "text_2": ["wet weather", "sunshine"]}},
        {"custom_id": "uneven", "method": "POST", "url": "/v1/score",
         "body": {"model": "all-MiniLM-L6-v2", "text_1": ["a", "b"], "text_2": ["c", "d", "e"]}},
    ]
    batch = _run(batch_ctx, _lines(requests), endpoint="/v1/score")
    assert batch.status == "completed" and (batch.request_counts.completed, batch.request_counts.failed) == (2, 1)
    output = {line["custom_id"]: line["response"]["body"] for line in _file_lines(batch_ctx, batch.output_file_id)}
    # Then each score is the cosine of the engine's vectors (MiniLM is a bi-encoder), in vLLM's shape
    vectors = dict(zip(["a cat", "a kitten", "a tax form", "rain", "wet weather", "sun", "sunshine"],
                       minilm_engine.embed(["a cat", "a kitten", "a tax form", "rain", "wet weather", "sun", "sunshine"])))
    expected = {"broadcast": [("a cat", "a kitten"), ("a cat", "a tax form")],
                "pairwise": [("rain", "wet weather"), ("sun", "sunshine")]}
    for custom_id, pairs in expected.items():
        body = output[custom_id]
        assert body["object"] == "list" and [d["index"] for d in body["data"]] == [0, 1]
        assert np.allclose([d["score"] for d in body["data"]], [float(vectors[a] @ vectors[b]) for a, b in pairs],
                           atol=1e-4)
    assert output["broadcast"]["data"][0]["score"] > output["broadcast"]["data"][1]["score"]
    error = _file_lines(batch_ctx, batch.error_file_id)[0]
    assert error["custom_id"] == "uneven" and "give one text_1" in error["response"]["body"]["error"]["message"]
