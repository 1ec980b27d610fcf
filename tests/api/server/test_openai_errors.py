"""Errors on OpenAI's routes reach the official ``openai`` client as its own exceptions, with the
message, ``param`` and ``code`` (``{"error": {...}}``, OpenAI's statuses: 400 for a refused request);
poolq's own routes keep ``{"detail": ...}``. In process, offline: no model is ever loaded (every
request here is refused before the lane, or answered by a lane nobody serves)."""
from __future__ import annotations

import httpx
import openai
import pytest
from support.api_client import InProcessTransport, authed_client

from poolq.api.server.guards.rate_limit import InMemoryRateLimiter
from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.jobs.settings import Settings
from poolq.worker.local_runner import local_context

MODEL = "all-MiniLM-L6-v2"
FILE_LIMIT = 1024  # the smallest max_file_bytes Settings accepts


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """The API over a local context, with a lane nobody serves (an embeddings request that gets past
    validation waits 0.2 s, then is 503)."""
    settings = Settings(max_file_bytes=FILE_LIMIT, embeddings_timeout_s=0.2)
    ctx = local_context(tmp_path_factory.mktemp("openai-errors") / "store", settings)
    return authed_client(ctx, lane=InMemoryEmbeddingLane())


class _ReadingTransport(InProcessTransport):
    """Reads a streamed request body (the client's multipart upload) before handing it on."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        return super().handle_request(request)


def _openai(client, key: str | None = None) -> openai.OpenAI:
    http_client = httpx.Client(transport=_ReadingTransport(client), base_url="http://testserver")
    return openai.OpenAI(api_key=key or client.api_key, base_url="http://testserver/v1", http_client=http_client,
                         max_retries=0)


def test_an_unknown_model_is_a_bad_request_naming_model(client):
    with pytest.raises(openai.BadRequestError) as refused:
        _openai(client).embeddings.create(model="nope", input="x")
    error = refused.value
    assert "unknown model 'nope'" in error.message and f"known models: {MODEL}" in error.message
    assert (error.param, error.code, error.type) == ("model", "invalid_model", "invalid_request_error")
    assert error.body == {"message": error.body["message"], "type": "invalid_request_error", "param": "model",
                          "code": "invalid_model"}
    assert "unknown model 'nope'" in error.body["message"]


@pytest.mark.parametrize("options, param, code", [
    ({"input": ["a", "b", "c", ""]}, "input.3", "empty_input"),
    ({"input": "x", "dimensions": 0}, "dimensions", "greater_than_equal"),
    ({"input": "x", "encoding_format": "ascii"}, "encoding_format", "literal_error"),
])
def test_a_refused_field_is_named_by_its_dotted_path(client, options, param, code):
    with pytest.raises(openai.BadRequestError) as refused:
        _openai(client).embeddings.create(model=MODEL, **options)
    assert (refused.value.param, refused.value.code) == (param, code), refused.value.body
    assert refused.value.message.startswith(f"Error code: 400 - {param}: ")


def test_missing_batches_and_files_are_not_found_with_the_message(client):
    api = _openai(client)
    with pytest.raises(openai.NotFoundError) as missing:
        api.batches.retrieve("batch_nope")
    assert "batch 'batch_nope' not found" in missing.value.message and missing.value.code == "not_found"
    with pytest.raises(openai.NotFoundError) as missing:
        api.files.retrieve("file-nope")
    assert "file 'file-nope' not found" in missing.value.message


def test_a_bad_key_is_an_authentication_error(client):
    with pytest.raises(openai.AuthenticationError) as refused:
        _openai(client, key="pq_not_a_key").models.list()
    assert refused.value.code == "invalid_api_key" and refused.value.type == "authentication_error"
    assert "not valid" in refused.value.message
    assert refused.value.response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("size", [2 * FILE_LIMIT, 128 << 10], ids=["counted-by-the-route", "refused-by-content-length"])
def test_a_file_over_the_limit_is_413_with_the_message(client, size):
    with pytest.raises(openai.APIStatusError) as refused:
        _openai(client).files.create(file=("big.jsonl", b"x" * size), purpose="batch")
    assert refused.value.status_code == 413 and refused.value.code == "request_too_large"
    assert "larger than" in refused.value.message and "bytes" in refused.value.message


def test_a_503_keeps_retry_after(client):
    with pytest.raises(openai.InternalServerError) as unavailable:
        _openai(client).embeddings.create(model=MODEL, input="x")
    assert unavailable.value.status_code == 503 and unavailable.value.response.headers["Retry-After"] == "5"
    assert "no compute worker answered within 0.2 s" in unavailable.value.message
    assert unavailable.value.code == "service_unavailable"


def test_a_429_is_rate_limit_exceeded_with_retry_after(tmp_path):
    ctx = local_context(tmp_path / "store")
    api = _openai(authed_client(ctx, limiter=InMemoryRateLimiter(0.001, 1)))
    api.batches.list()
    with pytest.raises(openai.RateLimitError) as limited:
        api.batches.list()
    assert limited.value.code == "rate_limit_exceeded" and "over its request rate" in limited.value.message
    assert int(limited.value.response.headers["Retry-After"]) >= 1


def test_unknown_paths_and_methods_under_openais_routes_answer_in_its_shape(client):
    for method, path, status in (("GET", "/v1/files/a/b/c", 404), ("DELETE", "/v1/models", 405),
                                 ("PUT", "/v1/embeddings", 405)):
        response = client.request(method, path)
        assert response.status_code == status and set(response.json()) == {"error"}, (method, path, response.text)


def test_poolqs_own_routes_keep_their_shape(client):
    refused = client.post("/v1/jobs", json={"model": "nope", "input": {"documents": [{"id": "a", "text": "x"}]}})
    assert refused.status_code == 422
    [error] = refused.json()["detail"]
    assert error["loc"] == ["body", "model"] and "unknown model 'nope'" in error["msg"]
    assert client.get(f"/v1/jobs/{'0' * 32}").json() == {"detail": f"job {'0' * 32!r} not found"}
    # a path that only begins like one of OpenAI's is not one of them
    assert set(client.get("/v1/modelsx").json()) == {"detail"}
