"""``POST /v1/embeddings`` in process: the in-memory lane, served by a real MiniLM engine in a thread
(``LaneServer``, as in a compute worker). Formats, dimensions and usage; every refusal (400 naming
the field or the input as OpenAI's ``param``, 413), 503 with Retry-After when no worker answers or
one fails; auth, tenants and rate limits as on every route. Every error is OpenAI's
``{"error": {"message", "type", "param", "code"}}``."""
import base64
import threading

import numpy as np
import pytest
from fastapi.testclient import TestClient
from support.api_client import authed_client

from poolq.api.server.app import create_app
from poolq.api.server.guards.rate_limit import InMemoryRateLimiter
from poolq.engine import LongDocumentMode, LongDocumentPolicy
from poolq.jobs.lane.lane_messages import EmbeddingReply
from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.jobs.settings import Settings
from poolq.worker.lane.lane_server import LaneServer
from poolq.worker.local_runner import local_context

MODEL = "all-MiniLM-L6-v2"
LIMITS = {"embeddings_max_inputs": 8, "embeddings_max_request_tokens": 2000}
TEXTS = ["How do I rotate an API key?", "Where are a job's results stored?", "query three"]


@pytest.fixture(scope="module")
def served(tmp_path_factory, minilm_engine):
    """A context and an in-memory lane answered by a LaneServer thread on the session's MiniLM."""
    ctx = local_context(tmp_path_factory.mktemp("embeddings") / "store", Settings(**LIMITS))
    ctx.engines.use(MODEL, minilm_engine)
    lane = InMemoryEmbeddingLane()
    with LaneServer(lane, lambda: ctx.engines, poll_s=0.05):
        yield ctx, lane


@pytest.fixture(scope="module")
def client(served):
    ctx, lane = served
    return authed_client(ctx, lane=lane)


def _with_model(body: dict) -> dict:
    return {"model": MODEL, **body}


def _embed(client, **body):
    return client.post("/v1/embeddings", json={"model": MODEL, **body})


def _error(response) -> dict:
    """The OpenAI error of an answer (``message``, ``type``, ``param``, ``code``), and nothing else in its body."""
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _decoded(item) -> np.ndarray:
    return np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")


def test_float_vectors_in_openais_shape(client, served, minilm_engine):
    response = _embed(client, input=TEXTS)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list" and body["model"] == MODEL
    assert [(item["object"], item["index"]) for item in body["data"]] == [("embedding", i) for i in range(len(TEXTS))]
    vectors = np.array([item["embedding"] for item in body["data"]], dtype=np.float32)
    np.testing.assert_allclose(vectors, minilm_engine.embed(TEXTS), atol=1e-6)
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > len(TEXTS)
    assert response.headers["X-Poolq-Engine"] == served[0].engines.identity(MODEL)


def test_base64_is_the_same_vectors_as_little_endian_float32(client):
    floats = _embed(client, input=TEXTS).json()["data"]
    packed = _embed(client, input=TEXTS, encoding_format="base64").json()["data"]
    for as_floats, as_base64 in zip(floats, packed):
        np.testing.assert_array_equal(_decoded(as_base64), np.array(as_floats["embedding"], dtype=np.float32))


def test_dimensions_keep_the_first_ones_renormalized(client, minilm_engine):
    body = _embed(client, input=TEXTS, dimensions=64).json()
    vectors = np.array([item["embedding"] for item in body["data"]], dtype=np.float32)
    assert vectors.shape == (len(TEXTS), 64)
    np.testing.assert_allclose(vectors, _unit(minilm_engine.embed(TEXTS)[:, :64]), atol=1e-6)


@pytest.mark.parametrize("shape", ["string", "token array", "token arrays"])
def test_each_shape_of_input(client, minilm_engine, shape):
    [token_ids] = minilm_engine.tokenizer.count_and_tokenize([TEXTS[0]])
    sent = {"string": TEXTS[0], "token array": token_ids, "token arrays": [token_ids, token_ids]}[shape]
    body = _embed(client, input=sent).json()
    expected = minilm_engine.embed([TEXTS[0]])[0]
    for item in body["data"]:
        np.testing.assert_allclose(item["embedding"], expected, atol=1e-6)
    assert len(body["data"]) == (2 if shape == "token arrays" else 1)


def test_long_inputs_follow_long_documents_as_a_job_would(client, sample_documents, minilm_engine):
    long_text = sample_documents[0]["text"]  # well past MiniLM's 256-token window
    refused = _embed(client, input=["short", long_text])
    assert refused.status_code == 400
    error = _error(refused)
    assert (error["param"], error["code"], error["type"]) == ("input.1", "document_too_long", "invalid_request_error")
    assert "input 1: document has" in error["message"] and "window is 256" in error["message"]
    for mode in ("truncate", "chunked"):
        response = _embed(client, input=["short", long_text], long_documents={"mode": mode})
        assert response.status_code == 200, response.text
        expected = minilm_engine.embed([long_text], policy=LongDocumentPolicy(mode=LongDocumentMode(mode)))[0]
        np.testing.assert_allclose(response.json()["data"][1]["embedding"], expected, atol=1e-6)


@pytest.mark.parametrize("body, loc", [
    ({"input": "x"}, ["body", "model"]),
    ({"model": "no-such-model", "input": "x"}, ["body", "model"]),
    ({"model": "splade-tiny", "input": "x"}, ["body", "model"]),  # serves sparse_embed, not embed
    (_with_model({"input": "x", "dimensions": 0}), ["body", "dimensions"]),
    (_with_model({"input": "x", "dimensions": 385}), ["body", "dimensions"]),
    (_with_model({"input": "x", "dimensions": "64"}), ["body", "dimensions"]),
    (_with_model({"input": "x", "encoding_format": "ascii"}), ["body", "encoding_format"]),
    (_with_model({"input": []}), ["body", "input"]),
    (_with_model({}), ["body", "input"]),
    (_with_model({"input": ""}), ["body", "input", 0]),
    (_with_model({"input": ["fine", ""]}), ["body", "input", 1]),
    (_with_model({"input": [[1, 2], []]}), ["body", "input", 1]),
    (_with_model({"input": [5, -1]}), ["body", "input"]),
    (_with_model({"input": [True, 2]}), ["body", "input"]),
    (_with_model({"input": ["text", 7]}), ["body", "input"]),
    (_with_model({"input": [[1, 2], [3, "4"]]}), ["body", "input"]),
    (_with_model({"input": [1.5]}), ["body", "input"]),
    (_with_model({"input": [[101, 30522]]}), ["body", "input", 0]),  # past MiniLM's vocabulary: the worker refuses it
    (_with_model({"input": "x", "long_documents": {"mode": "late_chunks"}}), ["body", "long_documents"]),
    (_with_model({"input": "x", "long_documents": {"mode": "naive_chunks"}}), ["body", "long_documents"]),
    (_with_model({"input": "x", "long_documents": {"mode": "sideways"}}), ["body", "long_documents", "mode"]),
    (_with_model({"input": "x", "long_documents": {"window_tokens": 100000}}), ["body", "long_documents", "window_tokens"]),
    # [CLS] and [SEP] fill a window of 2 alone: refused before a worker would (it answered 503, as its own failure)
    (_with_model({"input": "x", "long_documents": {"window_tokens": 2}}), ["body", "long_documents", "window_tokens"]),
    (_with_model({"input": "x", "long_documents": {"mode": "chunked", "window_tokens": 1}}),
     ["body", "long_documents", "window_tokens"]),
    (_with_model({"input": "x", "temperature": 1}), ["body", "temperature"]),
    (_with_model({"input": "x", "prompt": "query: ", "prompt_name": "query"}), ["body", "prompt"]),
], ids=lambda value: str(value)[:60])
def test_refusals_are_400_naming_the_field(client, body, loc):
    response = client.post("/v1/embeddings", json=body)
    assert response.status_code == 400, response.text
    param, expected = _error(response)["param"], ".".join(map(str, loc[1:]))
    assert param == expected or param.startswith(expected + "."), response.json()


def test_an_empty_body_says_the_body_is_empty(client):
    response = client.post("/v1/embeddings", content=b"", headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "the request body is empty" in _error(response)["message"]


def test_chunk_modes_are_refused_with_a_reason(client):
    error = _error(_embed(client, input="x", long_documents={"mode": "late_chunks"}))
    assert "one vector per chunk" in error["message"] and "'chunked'" in error["message"]


def test_user_is_accepted(client):
    assert _embed(client, input="x", user="user-1234").status_code == 200


def test_too_many_inputs_is_413(client):
    response = _embed(client, input=["x"] * (LIMITS["embeddings_max_inputs"] + 1))
    assert response.status_code == 413 and "9 inputs; at most 8" in _error(response)["message"]
    assert _error(response)["code"] == "request_too_large"


def test_too_many_tokens_in_all_is_413_and_one_input_too_long_is_400_naming_it(client):
    half = "word " * 1400  # ~1750 estimated tokens each: two of them are over the 2000 of a request
    response = _embed(client, input=[half, half], long_documents={"mode": "truncate"})
    assert response.status_code == 413 and "at most about 2000 per request" in _error(response)["message"]
    response = _embed(client, input=["fine", "word " * 2000], long_documents={"mode": "truncate"})
    assert response.status_code == 400
    error = _error(response)
    assert error["param"] == "input.1" and error["code"] == "input_too_long"
    assert error["message"].startswith("input.1: input 1 has 10000 characters")
    response = _embed(client, input=[list(range(1000, 3100))])
    assert _error(response)["message"].startswith("input.0: input 0 has 2100 token ids")


def test_the_prompt_counts_in_the_request_budget(client):
    """docs/models.md#prompts: the prompt goes before every input, and its tokens count in the estimate."""
    prompt = "word " * 400  # about 500 tokens before each input
    response = _embed(client, input=["x"] * 4, prompt=prompt, long_documents={"mode": "truncate"})
    assert response.status_code == 413, response.text  # ~4 x 500 tokens: over the 2000 of a request
    assert "with their prompt of about 500 tokens" in _error(response)["message"]
    one = _embed(client, input=["word " * 1300], prompt=prompt, long_documents={"mode": "truncate"})
    assert one.status_code == 400 and _error(one)["code"] == "input_too_long"  # 1625 + 500 tokens, alone
    assert _embed(client, input=["x"] * 4, prompt="word " * 20, long_documents={"mode": "truncate"}).status_code == 200


def _app_over(served, lane, **settings):
    ctx, _ = served
    return authed_client(ctx, ctx.settings.with_values(**settings), lane=lane)


def test_503_with_retry_after_when_no_worker_answers(served):
    client = _app_over(served, InMemoryEmbeddingLane(), embeddings_timeout_s=0.2)
    response = _embed(client, input=TEXTS)
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    error = _error(response)
    assert "no compute worker answered within 0.2 s" in error["message"]
    assert (error["type"], error["code"]) == ("server_error", "service_unavailable")


def test_503_when_the_worker_fails(served):
    lane = InMemoryEmbeddingLane()

    def failing_worker():
        taken = lane.take(60)
        lane.reply(taken, EmbeddingReply(failure="RuntimeError: CUDA error: out of memory"))

    worker = threading.Thread(target=failing_worker)
    worker.start()
    response = _embed(_app_over(served, lane), input=TEXTS)
    worker.join()
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    assert "CUDA" not in response.text  # the worker's own words stay in the logs


def test_503_at_once_when_too_many_requests_wait(served):
    # Given an API process that waits on one request at most, and one request waiting
    lane = InMemoryEmbeddingLane()
    client = _app_over(served, lane, embeddings_max_waiting=1)
    first = []
    waiting = threading.Thread(target=lambda: first.append(_embed(client, input=["first"])))
    waiting.start()
    taken = lane.take(60)  # the first request has reached the lane: it waits for its reply
    # When a second comes, it is refused at once; the first is answered when its reply comes
    second = _embed(client, input=["second"])
    lane.reply(taken, EmbeddingReply.of_vectors(np.ones((1, 2), dtype=np.float32), 3, "e"))
    waiting.join()
    assert second.status_code == 503 and "too many embeddings requests waiting" in _error(second)["message"]
    assert first[0].status_code == 200 and first[0].json()["data"][0]["embedding"] == [1.0, 1.0]


def test_no_key_or_a_bad_key_is_401(served):
    ctx, lane = served
    app_client = TestClient(create_app(ctx, ctx.settings, lane=lane))
    assert app_client.post("/v1/embeddings", json={"model": MODEL, "input": "x"}).status_code == 401
    response = app_client.post("/v1/embeddings", json={"model": MODEL, "input": "x"},
                               headers={"Authorization": "Bearer not-a-key"})
    assert response.status_code == 401 and response.headers["WWW-Authenticate"] == "Bearer"
    assert (_error(response)["type"], _error(response)["code"]) == ("authentication_error", "invalid_api_key")


def test_every_tenant_is_served_and_rate_limited_on_its_own(served):
    # Given two tenants' keys on an API whose tenants may make 2 requests in a burst
    ctx, lane = served
    client = authed_client(ctx, tenant="tenant-a", lane=lane, limiter=InMemoryRateLimiter(0.001, 2))
    other, _ = client.app.state.keys.create("tenant-b")
    as_b = {"Authorization": f"Bearer {other}"}
    # When tenant a uses its burst up
    answers = [_embed(client, input=TEXTS[0]) for _ in range(3)]
    # Then its third request is 429 (OpenAI's rate_limit_exceeded, with Retry-After); tenant b still gets the same vectors
    assert [answer.status_code for answer in answers] == [200, 200, 429]
    assert _error(answers[2])["code"] == "rate_limit_exceeded" and int(answers[2].headers["Retry-After"]) >= 1
    b = client.post("/v1/embeddings", json={"model": MODEL, "input": TEXTS[0]}, headers=as_b)
    assert b.status_code == 200
    assert client.post("/v1/embeddings", json={"model": MODEL, "input": TEXTS[0]}, headers=as_b).status_code == 200
