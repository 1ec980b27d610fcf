"""The official ``openai`` package, unchanged, against a live `poolq dev up` stack: Files and
Batches end to end (upload, create, poll, download, parse with its own types), cancel and
expiry, the file size limit, and tenants kept apart."""
import base64
import json
import os
import subprocess
import sys
import time

import httpx
import numpy as np
import openai
import pytest
from openai.types import CreateEmbeddingResponse
from support.dev_stack import dev_stack

pytestmark = pytest.mark.integration

MODEL = "all-MiniLM-L6-v2"
ENDED = ("completed", "failed", "expired", "cancelled")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    env = {"POOLQ_SHARD_MAX_DOCUMENTS": "8", "POOLQ_MAX_FILE_BYTES": str(2 << 20)}
    with dev_stack(tmp_path_factory.mktemp("openai-stack"), env=env) as info:
        yield info


@pytest.fixture(scope="module")
def client(stack):
    with openai.OpenAI(base_url=stack["api_url"] + "/v1", api_key=stack["api_key"], max_retries=0) as opened:
        yield opened


def _embedding_line(custom_id: str, text, **body) -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/embeddings",
                       "body": {"model": MODEL, "input": text, **body}})


def _upload(client, lines: list[str], name: str = "requests.jsonl"):
    return client.files.create(file=(name, ("\n".join(lines) + "\n").encode()), purpose="batch")


def _wait(client, batch_id: str, timeout: float = 600, until: tuple[str, ...] = ENDED):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if batch.status in until:
            return batch
        time.sleep(0.2)
    raise AssertionError(f"batch {batch_id} never reached {until}: {batch}")


def _lines(client, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]


def test_embeddings_batch_round_trip_equals_sentence_transformers(client, st_minilm, sample_documents):
    # Given a batch file: single texts, a list of texts, base64, and two bad lines
    texts = [d["text"][:400] for d in sample_documents[:7]]
    lines = [_embedding_line(f"doc-{i}", text) for i, text in enumerate(texts[:4])]
    lines += [_embedding_line("many", texts[4:7]), _embedding_line("packed", texts[0], encoding_format="base64"),
              "not json at all", _embedding_line("doc-0", "duplicate")]
    uploaded = _upload(client, lines)
    assert uploaded.purpose == "batch" and uploaded.bytes > 0 and uploaded.status == "processed"
    # When it is created and polled to its end
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h",
                                  metadata={"corpus": "sample"})
    assert batch.status == "validating" and batch.metadata == {"corpus": "sample"}
    batch = _wait(client, batch.id)
    # Then it completed: 6 answered, 2 refused, and the vectors are sentence-transformers'
    assert batch.status == "completed", batch
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (8, 6, 2)
    assert batch.completed_at and batch.in_progress_at and batch.model == MODEL
    assert client.files.retrieve(batch.output_file_id).purpose == "batch_output"
    output = {line["custom_id"]: line for line in _lines(client, batch.output_file_id)}
    assert sorted(output) == ["doc-0", "doc-1", "doc-2", "doc-3", "many", "packed"]
    expected = st_minilm.encode(texts, normalize_embeddings=True)
    for i in range(4):
        response = CreateEmbeddingResponse.model_validate(output[f"doc-{i}"]["response"]["body"])
        assert output[f"doc-{i}"]["response"]["status_code"] == 200 and output[f"doc-{i}"]["error"] is None
        assert response.model == MODEL and response.usage.prompt_tokens > 0
        assert np.allclose(response.data[0].embedding, expected[i], atol=1e-4)
    many = CreateEmbeddingResponse.model_validate(output["many"]["response"]["body"])
    assert [d.index for d in many.data] == [0, 1, 2]
    assert np.allclose(np.array([d.embedding for d in many.data]), expected[4:7], atol=1e-4)
    packed = output["packed"]["response"]["body"]["data"][0]["embedding"]
    assert np.allclose(np.frombuffer(base64.b64decode(packed), dtype="<f4"), expected[0], atol=1e-4)
    errors = _lines(client, batch.error_file_id)
    assert {(e["custom_id"], e["response"]["body"]["error"]["code"]) for e in errors} == {
        ("doc-0", "duplicate_custom_id"), (None, "invalid_json")}
    assert {(e.line, e.code) for e in batch.errors.data} == {(7, "invalid_json"), (8, "duplicate_custom_id")}
    # And the batch is a poolq job, listed among the tenant's batches
    assert batch.id in [b.id for b in client.batches.list(limit=100)]
    assert uploaded.id in [f.id for f in client.files.list(purpose="batch")]


def test_rerank_batch_orders_documents_by_score(client, st_minilm):
    documents = ["Paris is the capital of France.", "Bananas are yellow.", "France's capital city is Paris."]
    line = json.dumps({"custom_id": "q1", "method": "POST", "url": "/v1/rerank",
                       "body": {"model": MODEL, "query": "What is the capital of France?", "documents": documents,
                                "top_n": 2}})
    batch = client.batches.create(input_file_id=_upload(client, [line]).id, endpoint="/v1/rerank",
                                  completion_window="24h")
    batch = _wait(client, batch.id)
    assert batch.status == "completed", batch
    results = _lines(client, batch.output_file_id)[0]["response"]["body"]["results"]
    query, docs = st_minilm.encode(["What is the capital of France?"] + documents, normalize_embeddings=True)[[0]], \
        st_minilm.encode(documents, normalize_embeddings=True)
    cosine = (docs @ query[0]).tolist()
    order = sorted(range(3), key=lambda i: -cosine[i])[:2]
    assert [r["index"] for r in results] == order
    assert np.allclose([r["relevance_score"] for r in results], [cosine[i] for i in order], atol=1e-4)
    assert results[0]["document"]["text"] == documents[order[0]]


def _many_requests(sample_documents, count: int) -> list[str]:
    long_texts = [d["text"] for d in sample_documents]
    return [_embedding_line(f"r{i}", long_texts[i % len(long_texts)][:1200],
                            poolq={"long_documents": {"mode": "truncate"}}) for i in range(count)]


def _partition(client, batch, count: int) -> tuple[set, dict]:
    """Every request is in exactly one file; returns the answered ids and the other ids' codes."""
    answered = {line["custom_id"] for line in _lines(client, batch.output_file_id)}
    others = {line["custom_id"]: (line["error"] or line["response"]["body"]["error"])["code"]
              for line in _lines(client, batch.error_file_id)}
    assert not answered & set(others) and answered | set(others) == {f"r{i}" for i in range(count)}
    return answered, others


def test_cancel_keeps_what_was_done_and_lists_the_rest(client, sample_documents):
    batch = client.batches.create(input_file_id=_upload(client, _many_requests(sample_documents, 300)).id,
                                  endpoint="/v1/embeddings", completion_window="24h")
    # Its input read and its job running: a cancel while it is still validating ends it with no files
    # (tests/products/batches/test_batch_flow.py), which is not what this test is about
    _wait(client, batch.id, until=("in_progress", *ENDED))
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at
    batch = _wait(client, batch.id)
    assert batch.status == "cancelled" and batch.cancelled_at, batch
    answered, others = _partition(client, batch, 300)
    assert set(others.values()) == {"batch_cancelled"} and len(answered) < 300
    with pytest.raises(openai.ConflictError):
        client.batches.cancel(batch.id)


def test_a_batch_past_its_window_expires(client, sample_documents):
    batch = client.batches.create(input_file_id=_upload(client, _many_requests(sample_documents, 300)).id,
                                  endpoint="/v1/embeddings", completion_window="2s")
    batch = _wait(client, batch.id)
    assert batch.status == "expired" and batch.expired_at, batch
    answered, others = _partition(client, batch, 300)
    assert set(others.values()) == {"batch_expired"}
    assert batch.request_counts.completed == len(answered) and batch.request_counts.failed == len(others)


def test_expiry_policies_are_taken_as_openai_sends_them(stack, client):
    # Given an upload and a batch with OpenAI's expiry options
    uploaded = client.files.create(file=("in.jsonl", (_embedding_line("a", "hello") + "\n").encode()), purpose="batch",
                                   expires_after={"anchor": "created_at", "seconds": 3600})
    assert uploaded.expires_at == uploaded.created_at + 3600
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h",
                                  output_expires_after={"anchor": "created_at", "seconds": 7200})
    batch = _wait(client, batch.id)
    # Then its output file expires two hours after it was written
    assert batch.status == "completed", batch
    output = client.files.retrieve(batch.output_file_id)
    assert output.expires_at == output.created_at + 7200
    # And a policy out of OpenAI's range (1 hour to 30 days) is refused, naming the field, before anything is stored
    for bad in ({"anchor": "created_at", "seconds": 60}, {"anchor": "last_active_at", "seconds": 3600}):
        with pytest.raises(openai.BadRequestError) as refused:
            client.files.create(file=("x.jsonl", b"{}\n"), purpose="batch", expires_after=bad)
        assert "expires_after" in str(refused.value.body)
        with pytest.raises(openai.BadRequestError) as refused:
            client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h",
                                  output_expires_after=bad)
        assert "output_expires_after" in str(refused.value.body)
    half = httpx.post(stack["api_url"] + "/v1/files", headers={"Authorization": f"Bearer {stack['api_key']}"},
                      files={"file": ("x.jsonl", b"{}\n")}, data={"purpose": "batch", "expires_after[seconds]": "3600"})
    assert half.status_code == 400 and half.json()["error"]["param"] == "expires_after[anchor]"


def test_a_file_over_the_limit_is_refused(client):
    with pytest.raises(openai.APIStatusError) as refused:
        client.files.create(file=("big.jsonl", b"x" * (3 << 20)), purpose="batch")
    assert refused.value.status_code == 413


def test_another_tenant_sees_neither_files_nor_batches(stack, client):
    uploaded = _upload(client, [_embedding_line("a", "hello")])
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h")
    env = {name: value for name, value in os.environ.items() if not name.startswith("POOLQ_")}
    env["POOLQ_DEV_DIR"] = stack["dir"]
    created = subprocess.run([sys.executable, "-m", "poolq.api", "keys", "create", "--tenant", "other"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    with openai.OpenAI(base_url=stack["api_url"] + "/v1", api_key=created.stdout.strip().splitlines()[-1],
                       max_retries=0) as other:
        for call in (lambda: other.files.retrieve(uploaded.id), lambda: other.files.content(uploaded.id),
                     lambda: other.files.delete(uploaded.id), lambda: other.batches.retrieve(batch.id),
                     lambda: other.batches.cancel(batch.id)):
            with pytest.raises(openai.NotFoundError):
                call()
        assert uploaded.id not in [f.id for f in other.files.list()]
        with pytest.raises(openai.BadRequestError):  # its file is not theirs to batch
            other.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h")
    assert _wait(client, batch.id).status == "completed"
    assert client.files.delete(uploaded.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(uploaded.id)
