"""The Python client (poolq.api.client.poolq_client) against the in-process app: jobs run inline inside the request,
result URLs are file:// URIs of the local store (the stack and CLI tests cover S3)."""
import json

import httpx
import numpy as np
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from support.api_client import InProcessTransport, authed_client
from support.job_doubles import RecordingEnqueuer
from support.job_doubles import drain as _drain

from poolq.api.client.poolq_client import PoolqClient, PoolqConnectionError, PoolqError
from poolq.api.server.guards.rate_limit import RateDecision, RateLimiter

DOCS = [{"id": f"doc-{i}", "text": f"document number {i} talks about topic {i % 3}"} for i in range(10)]


@pytest.fixture
def ctx(local_ctx):
    return local_ctx


@pytest.fixture
def app_client(ctx):
    return authed_client(ctx)


@pytest.fixture
def poolq(app_client):
    with _client_for(app_client) as client:
        yield client


def test_submit_wait_read_numpy_and_download(poolq, tmp_path):
    job = poolq.submit({"input": {"documents": DOCS}})
    seen = []
    final = poolq.wait(job["id"], poll_interval=0.01, timeout=30, on_progress=seen.append)
    assert final["status"] == "succeeded" and seen[-1] == final and poolq.get(job["id"]) == final
    assert final["counts"] == {"total": 10, "completed": 10, "failed": 0, "not_processed": 0}
    # read_numpy: every id once, unit vectors equal to the table's
    ids, vectors = poolq.read_numpy(job["id"])
    assert sorted(ids) == sorted(d["id"] for d in DOCS) and vectors.shape == (10, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    table = poolq.read_table(job["id"])
    assert table.column("id").to_pylist() == ids
    assert np.array_equal(np.stack(table.column("embedding").to_numpy(zero_copy_only=False)), vectors)
    # download: parts/, errors.jsonl, manifest.json; the parts hold every id exactly once
    paths = poolq.download(job["id"], tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [p.name for p in paths[-2:]] == ["errors.jsonl", "manifest.json"] and len(paths) == len(manifest["parts"]) + 2
    assert len(manifest["parts"]) == 3 and all(p.parent == tmp_path / "out" / "parts" for p in paths[:-2])
    downloaded = [i for p in paths[:-2] for i in pq.read_table(p).column("id").to_pylist()]
    assert sorted(downloaded) == sorted(ids) and (tmp_path / "out" / "errors.jsonl").read_text() == ""
    assert not list((tmp_path / "out").rglob(".*.partial"))


def test_read_numpy_decodes_the_jobs_dtype(poolq):
    exact = poolq.submit({"input": {"documents": DOCS}})
    coded = poolq.submit({"input": {"documents": DOCS}, "output": {"dtype": "int8"}})
    ids, vectors = poolq.read_numpy(exact["id"])
    coded_ids, decoded = poolq.read_numpy(coded["id"])
    by_id = dict(zip(coded_ids, decoded))
    assert decoded.dtype == np.float32 and sorted(coded_ids) == sorted(ids)
    scale = 2.0 / 255  # the default range [-1, 1] over 256 codes
    assert np.abs(np.stack([by_id[i] for i in ids]) - vectors).max() <= scale / 2 + 1e-6


def test_jobs_pages_newest_first(poolq):
    submitted = [poolq.submit({"input": {"documents": DOCS[:1]}})["id"] for _ in range(3)]
    first = poolq.jobs(limit=2)
    assert [j["id"] for j in first["jobs"]] == submitted[::-1][:2] and first["next_before"] == submitted[1]
    rest = poolq.jobs(limit=2, before=first["next_before"])
    assert [j["id"] for j in rest["jobs"]] == [submitted[0]] and rest["next_before"] is None


def test_cancel_a_queued_job_then_wait(ctx):
    ctx.enqueuer = RecordingEnqueuer()
    with _client_for(authed_client(ctx)) as poolq:
        job = poolq.submit({"input": {"documents": DOCS}})
        assert poolq.cancel(job["id"])["status"] == "cancelling"
        _drain(ctx)
        final = poolq.wait(job["id"], poll_interval=0.01, timeout=10)
        assert final["status"] == "cancelled"
        ids, vectors = poolq.read_numpy(job["id"])
        assert ids == [] and vectors.shape[0] == 0  # no parts: nothing was embedded
        with pytest.raises(PoolqError) as info:
            poolq.cancel(job["id"])
    assert info.value.status_code == 409 and "already finished: cancelled" in info.value.detail


def test_refusals_raise_poolq_error_with_status_and_detail(poolq):
    with pytest.raises(PoolqError) as info:
        poolq.get("0" * 32)
    assert info.value.status_code == 404 and info.value.detail == f"job {'0' * 32!r} not found"
    assert info.value.retry_after is None
    with pytest.raises(PoolqError) as info:
        poolq.submit({"input": {"documents": DOCS}, "long_documents": {"mode": "squash"}})
    assert info.value.status_code == 422
    assert ["body", "long_documents", "mode"] in [error["loc"] for error in info.value.detail]
    with pytest.raises(PoolqError) as info:
        poolq.results("f" * 32)
    assert info.value.status_code == 404
    with pytest.raises(PoolqError) as info:
        poolq.upload(b'{"id": "a", "text": "x"}\n')  # the local store cannot presign a PUT
    assert info.value.status_code == 501


def test_idempotency_key_returns_the_same_job(poolq):
    first = poolq.submit({"input": {"documents": DOCS[:2]}}, idempotency_key="same")
    assert poolq.submit({"input": {"documents": DOCS[:2]}}, idempotency_key="same")["id"] == first["id"]
    with pytest.raises(PoolqError) as info:
        poolq.submit({"input": {"documents": DOCS[:1]}}, idempotency_key="same")
    assert info.value.status_code == 422 and info.value.detail[0]["loc"] == ["header", "idempotency-key"]


def test_api_key_from_the_environment_or_missing(app_client, monkeypatch):
    client = app_client
    monkeypatch.delenv("POOLQ_API_KEY", raising=False)
    with _client_for(client, api_key=None) as anonymous, pytest.raises(PoolqError) as info:
        anonymous.jobs()
    assert info.value.status_code == 401 and "send an API key" in info.value.detail
    with _client_for(client, api_key="pq_wrong") as wrong, pytest.raises(PoolqError) as info:
        wrong.jobs()
    assert info.value.status_code == 401 and "not valid" in info.value.detail
    monkeypatch.setenv("POOLQ_API_KEY", client.api_key)
    with _client_for(client, api_key=None) as from_env:
        assert from_env.jobs().model_dump() == {"jobs": [], "next_before": None}


def test_an_openai_routes_error_reads_as_its_message(app_client):
    with _client_for(app_client, api_key="pq_wrong") as wrong, pytest.raises(PoolqError) as info:
        wrong.models()  # GET /v1/models answers in OpenAI's error shape
    assert info.value.status_code == 401 and info.value.detail == "the API key is not valid (unknown, revoked or mistyped)"


def test_429_carries_retry_after(ctx):
    with _client_for(authed_client(ctx, limiter=_Refusing())) as poolq, pytest.raises(PoolqError) as info:
        poolq.jobs()
    assert info.value.status_code == 429 and info.value.retry_after == 7 and "over its request rate" in info.value.detail


def test_wait_retries_429_and_503_a_bounded_number_of_times(app_client, poolq):
    job = poolq.submit({"input": {"documents": DOCS[:1]}})

    def flaky_client(failures: list[int]) -> tuple[PoolqClient, "_Flaky"]:
        flaky = _Flaky(InProcessTransport(TestClient(app_client.app)), failures)
        return PoolqClient("http://testserver", app_client.api_key, transport=flaky), flaky

    client, flaky = flaky_client([429, 503, 429])
    with client:
        assert client.wait(job["id"], poll_interval=0.01, max_retries=3)["status"] == "succeeded"
    assert flaky.answered == [429, 503, 429, 200]
    client, flaky = flaky_client([503, 503, 503])
    with client, pytest.raises(PoolqError) as info:
        client.wait(job["id"], poll_interval=0.01, max_retries=2)
    assert info.value.status_code == 503 and info.value.retry_after == 0 and flaky.answered == [503, 503, 503]
    client, flaky = flaky_client([404])
    with client, pytest.raises(PoolqError):
        client.wait(job["id"], poll_interval=0.01)  # not retried
    assert flaky.answered == [404]


def test_unreachable_server_is_a_connection_error():
    with PoolqClient("http://127.0.0.1:1", "pq_secret", timeout=2) as client, pytest.raises(PoolqConnectionError) as info:
        client.get("0" * 32)
    assert "cannot reach the poolq API at http://127.0.0.1:1" in str(info.value) and "pq_secret" not in str(info.value)


def _client_for(test_client: TestClient, api_key: str | None = "from-test-client") -> PoolqClient:
    """A PoolqClient whose requests go to ``test_client``'s in-process app (its own key by default)."""
    bare = TestClient(test_client.app)  # no default Authorization: the PoolqClient sends its own
    key = test_client.api_key if api_key == "from-test-client" else api_key
    return PoolqClient("http://testserver", key, transport=InProcessTransport(bare))


class _Flaky(httpx.BaseTransport):
    """Answers the first requests with the given error statuses, then forwards to ``inner``."""

    def __init__(self, inner: InProcessTransport, failures: list[int]) -> None:
        self.inner, self.failures, self.answered = inner, list(failures), []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.failures:
            status = self.failures.pop(0)
            self.answered.append(status)
            return httpx.Response(status, headers={"Retry-After": "0"}, json={"detail": "busy"})
        response = self.inner.handle_request(request)
        self.answered.append(response.status_code)
        return response


class _Refusing(RateLimiter):
    def __init__(self) -> None:
        super().__init__(1, 1)

    def _spend(self, key: str, cost: int) -> RateDecision:
        return RateDecision(allowed=False, retry_after_s=7)




def test_api_url_from_the_environment_else_the_local_stack(monkeypatch):
    monkeypatch.setenv("POOLQ_API_URL", "http://127.0.0.1:9/")
    with PoolqClient() as from_env:
        assert from_env.base_url == "http://127.0.0.1:9"
    monkeypatch.delenv("POOLQ_API_URL")
    with PoolqClient() as default:
        assert default.base_url == "http://127.0.0.1:8000"
