"""An outage of the store or Redis is a 503 with Retry-After, never a 500 (the live chaos test runs
the real services: tests/jobs/faults/test_outage_chaos.py)."""
import pytest
import redis
from fastapi.testclient import TestClient
from support.security_app import holding_context

from poolq.api.server.app import create_app
from poolq.jobs.settings import Settings
from poolq.jobs.tenancy.api_keys import ApiKeyStore
from poolq.storage import ObjectNotFoundError, StorageError


class _Switchable:
    """Wraps a dependency; once ``fail_with`` is set, every method call raises it."""

    def __init__(self, target) -> None:
        self._target = target
        self.fail_with: Exception | None = None

    def __getattr__(self, name):
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return attribute

        def call(*args, **kwargs):
            if self.fail_with is not None:
                raise self.fail_with
            return attribute(*args, **kwargs)

        return call


@pytest.fixture
def api(tmp_path):
    settings = Settings(store="local", local_store_root=tmp_path, output_prefix="jobs", api_key_cache_s=3600)
    ctx = holding_context(settings)
    secret, _ = ApiKeyStore.from_settings(ctx.store, settings).create("acme")
    ctx.store, ctx.status = _Switchable(ctx.store), _Switchable(ctx.status)
    client = TestClient(create_app(ctx, settings, checks=[]), raise_server_exceptions=False)
    headers = {"Authorization": f"Bearer {secret}"}
    job = client.post("/v1/jobs", json={"input": {"documents": [{"id": "a", "text": "hello"}]}}, headers=headers)
    assert job.status_code == 202, job.text  # the key is cached now: its lookup needs no store
    return client, headers, job.json()["id"], ctx


@pytest.mark.parametrize("dependency, error, expected", [
    # the job's status and tenant are cached in Redis: polling it needs no store
    ("store", StorageError("S3 answered 503 SlowDown"), [200, 503, 503, 503]),
    ("status", redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379"), [503, 503, 503, 503]),
])
def test_reads_and_writes_answer_503_with_retry_after_while_a_dependency_is_down(api, dependency, error, expected):
    client, headers, job_id, ctx = api
    getattr(ctx, dependency).fail_with = error
    answers = [
        client.get(f"/v1/jobs/{job_id}", headers=headers),
        client.get("/v1/jobs", headers=headers),
        client.post("/v1/jobs", json={"input": {"documents": [{"id": "b", "text": "x"}]}}, headers=headers),
        client.post(f"/v1/jobs/{job_id}/cancel", headers=headers),
    ]
    assert [answer.status_code for answer in answers] == expected, [answer.text for answer in answers]
    unavailable = [answer for answer in answers if answer.status_code == 503]
    assert all(answer.headers["Retry-After"].isdigit() for answer in unavailable)
    assert all("unavailable" in answer.json()["detail"] for answer in unavailable)
    # And once it is back, the same calls succeed
    getattr(ctx, dependency).fail_with = None
    assert client.get(f"/v1/jobs/{job_id}", headers=headers).status_code == 200


def test_a_permanent_store_error_a_route_did_not_expect_is_not_called_an_outage(api):
    client, headers, job_id, ctx = api
    ctx.store.fail_with = ObjectNotFoundError("gone")
    answer = client.get(f"/v1/jobs/{job_id}", headers=headers)
    assert answer.status_code != 503 and "Retry-After" not in answer.headers


def test_on_openais_routes_the_503_is_openais_shape_with_retry_after(api):
    client, headers, _, ctx = api
    ctx.store.fail_with = StorageError("S3 answered 503 SlowDown")
    answer = client.get("/v1/files", headers=headers)
    assert answer.status_code == 503 and answer.headers["Retry-After"].isdigit()
    error = answer.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("server_error", "service_unavailable", None)
    assert "unavailable" in error["message"]
