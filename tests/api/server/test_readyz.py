"""``/healthz`` and ``/readyz`` over the real service wiring (``api_services``): ready only while
Redis and the store answer; liveness never depends on them."""
import pytest
from fastapi.testclient import TestClient

from poolq.api.server.app import create_app
from poolq.api.server.services import api_services
from poolq.jobs.settings import Settings


def _client(tmp_path, redis_url: str) -> TestClient:
    settings = Settings(redis_url=redis_url, store="local", local_store_root=tmp_path / "store")
    services = api_services(settings)
    return TestClient(create_app(services.ctx, settings, limiter=services.limiter,
                                 auth_failures=services.auth_failures, checks=services.checks))


def test_readyz_is_503_when_redis_is_unreachable(tmp_path, closed_port):
    client = _client(tmp_path, f"redis://127.0.0.1:{closed_port}/0")  # nothing listens there
    response = client.get("/readyz")
    assert response.status_code == 503 and response.headers["Retry-After"].isdigit()
    assert response.json() == {"status": "unavailable", "redis": "error: ConnectionError", "store": "ok"}
    assert client.get("/healthz").status_code == 200
    metrics = client.get("/metrics")  # the gauges read the same Redis
    assert metrics.status_code == 503 and metrics.headers["Retry-After"].isdigit()


@pytest.mark.integration
def test_readyz_is_200_with_redis_up(tmp_path, redis_url):
    client = _client(tmp_path, redis_url)
    response = client.get("/readyz")
    assert response.status_code == 200 and response.json() == {"status": "ok", "redis": "ok", "store": "ok"}
    assert client.get("/metrics").status_code == 200
