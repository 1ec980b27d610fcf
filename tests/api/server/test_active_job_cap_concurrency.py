"""The per-tenant active-job cap holds under concurrent submissions: a real uvicorn API (two
worker processes, so the reservations race across processes too) on real Redis and SeaweedFS.

No Celery worker runs: accepted jobs stay queued, so every accepted job keeps its slot. 30 POSTs
of one tenant fired at once get exactly ``CAP`` 202s and 429s for the rest (never a 5xx), and the
tenant then has exactly ``CAP`` unfinished jobs; another tenant still gets its own ``CAP``; a second
burst of each finds the cap full; and once two jobs finish (cancelled, then finalized here as a
worker would), a third burst gets exactly the two freed slots.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from poolq.devtools.devstack.ports import wait_listening_port
from poolq.jobs.job_handle import JobHandle
from poolq.products.job_hooks import ProductHooks

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
CAP = 5
BURST = 30
REDIS_DB = 12  # a database of its own: the broker queues and the tenants' active sets are global
BUCKET = "poolq-capcheck"
TERMINAL = {"succeeded", "partially_succeeded", "failed", "cancelled"}


@dataclass
class CapApi:
    """The running API and what the test needs to reach around it."""

    url: str
    settings: object  # poolq.jobs.settings.Settings, as the API runs with
    keys: dict[str, str]  # tenant -> API key
    log_path: Path

    @property
    def tenants(self) -> list[str]:
        return list(self.keys)

    def headers(self, tenant: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[tenant]}"}

    def log_tail(self) -> str:
        return "--- uvicorn ---\n" + self.log_path.read_text(errors="replace")[-4000:]


@pytest.fixture(scope="module")
def cap_api(tmp_path_factory, seaweed, redis_url):
    import redis

    from poolq.jobs.settings import Settings
    from poolq.jobs.tenancy.api_keys import ApiKeyStore
    from poolq.storage import make_s3_client

    s3 = make_s3_client(seaweed.s3_config)
    try:
        s3.head_bucket(Bucket=BUCKET)
    except Exception:  # noqa: BLE001 - absent: create it
        s3.create_bucket(Bucket=BUCKET)
    url = redis_url.rsplit("/", 1)[0] + f"/{REDIS_DB}"
    redis.Redis.from_url(url).flushdb()
    prefix = f"capcheck-{uuid.uuid4().hex[:8]}"
    values = {
        "redis_url": url, "store": "s3", "bucket": BUCKET, "output_prefix": prefix,
        "s3_endpoint_url": seaweed.s3_config.endpoint_url, "s3_access_key_id": seaweed.s3_config.access_key_id,
        "s3_secret_access_key": seaweed.s3_config.secret_access_key,
        "max_active_jobs_per_tenant": CAP,
        # Request-rate limits out of the way: every 429 here must be the active-job cap's.
        "rate_limit_per_s": 1000, "rate_limit_burst": 100000,
    }
    settings = Settings(**values)
    store = ApiKeyStore.from_settings(settings.storage.object_store(), settings)
    tenants = [f"cap-{name}-{uuid.uuid4().hex[:6]}" for name in ("a", "b")]
    keys = {tenant: store.create(tenant)[0] for tenant in tenants}

    env = {**os.environ, **{f"POOLQ_{name.upper()}": str(value) for name, value in values.items()},
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    log_path = tmp_path_factory.mktemp("cap-api") / "uvicorn.log"
    # port 0: uvicorn's main process binds one the kernel picks (no other process can take it first)
    # and hands the socket to its workers; the port it listens on is the one it got.
    argv = [sys.executable, "-m", "uvicorn", "poolq.api.server.app:create_app", "--factory",
            "--host", "127.0.0.1", "--port", "0", "--workers", "2"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)

    def log_tail() -> str:
        return log_path.read_text(errors="replace")[-4000:]

    try:
        base_url = f"http://127.0.0.1:{wait_listening_port(process.pid, 90, 'uvicorn', log_path=log_path)}"
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, f"uvicorn exited with {process.returncode}:\n{log_tail()}"
            try:
                # both worker processes are up once the log says so twice
                if (httpx.get(f"{base_url}/healthz", timeout=2).status_code == 200
                        and log_path.read_text(errors="replace").count("Application startup complete") >= 2):
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"uvicorn did not come up in 90 s:\n{log_tail()}"
            time.sleep(0.2)
        yield CapApi(base_url, settings, keys, log_path)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        redis.Redis.from_url(url).flushdb()  # no queued plan tasks left for anyone


def burst(api: CapApi, tenant: str, tag: str, count: int = BURST) -> list[httpx.Response]:
    """``count`` POST /v1/jobs of ``tenant`` at once (distinct bodies, no Idempotency-Key), each from
    its own thread on its own connection, released together by a barrier."""
    barrier = threading.Barrier(count)

    def one(index: int) -> httpx.Response:
        body = {"input": {"documents": [{"id": f"{tag}-{index}", "text": f"document {index} of burst {tag}"}]}}
        with httpx.Client(base_url=api.url, headers=api.headers(tenant), timeout=60) as client:
            client.get("/healthz")  # connect first, so the POSTs leave together
            barrier.wait(timeout=60)
            return client.post("/v1/jobs", json=body)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def check_burst(api: CapApi, responses: list[httpx.Response], accepted: int) -> list[str]:
    """Exactly ``accepted`` 202s and the rest the cap's 429s (with Retry-After); returns the new ids."""
    statuses = Counter(response.status_code for response in responses)
    detail = "\n".join(f"{r.status_code} {r.text[:200]}" for r in responses if r.status_code not in (202, 429))
    assert statuses == Counter({202: accepted, 429: len(responses) - accepted}), (
        f"{dict(statuses)}\n{detail}\n{api.log_tail()}")
    for response in responses:
        if response.status_code == 429:
            assert "unfinished jobs" in response.json()["detail"], response.text  # the cap, not the rate limit
            assert response.headers.get("Retry-After"), response.headers
    return [response.json()["id"] for response in responses if response.status_code == 202]


def unfinished(api: CapApi, tenant: str) -> dict[str, str]:
    """The tenant's jobs that have not finished, as GET /v1/jobs lists them: id -> status."""
    response = httpx.get(f"{api.url}/v1/jobs", params={"limit": 500}, headers=api.headers(tenant), timeout=60)
    assert response.status_code == 200, response.text
    return {job["id"]: job["status"] for job in response.json()["jobs"] if job["status"] not in TERMINAL}


def finish_as_a_worker_would(api: CapApi, tenant: str, job_ids: list[str]) -> None:
    """Cancel the jobs over HTTP (they become ``cancelling``; their finalize task is queued for a
    worker), then run that finalize step here, in place of the worker there is not."""
    import redis

    from poolq.jobs.context import build_context
    from poolq.jobs.coordination.enqueuer import CeleryEnqueuer
    from poolq.jobs.steps.finalizer import finalize_job
    from poolq.worker.celery_app import create_celery_app

    for job_id in job_ids:
        response = httpx.post(f"{api.url}/v1/jobs/{job_id}/cancel", headers=api.headers(tenant), timeout=60)
        assert response.status_code == 202, response.text
    ctx = build_context(api.settings, CeleryEnqueuer(create_celery_app(api.settings)),
                        redis.Redis.from_url(api.settings.broker.redis_url), hooks=ProductHooks())
    for job_id in job_ids:
        assert finalize_job(JobHandle.bind(ctx, job_id)).value == "cancelled"


def test_concurrent_submissions_never_exceed_the_active_job_cap(cap_api):
    api = cap_api
    tenant_a, tenant_b = api.tenants

    # When 30 submissions of tenant A arrive at once
    first = check_burst(api, burst(api, tenant_a, "a1"), CAP)
    # Then exactly CAP were accepted, and A has exactly those CAP unfinished jobs (queued: no worker)
    assert unfinished(api, tenant_a) == {job_id: "queued" for job_id in first}

    # When 30 submissions of tenant B arrive at once: B's cap is its own
    second = check_burst(api, burst(api, tenant_b, "b1"), CAP)
    assert unfinished(api, tenant_b) == {job_id: "queued" for job_id in second}
    assert unfinished(api, tenant_a) == {job_id: "queued" for job_id in first}

    # When both burst again, at the same time: both are at their cap, so nothing is accepted
    with ThreadPoolExecutor(2) as pool:
        again_a, again_b = pool.map(lambda args: burst(api, *args), [(tenant_a, "a2"), (tenant_b, "b2")])
    assert check_burst(api, again_a, 0) == [] and check_burst(api, again_b, 0) == []
    assert set(unfinished(api, tenant_a)) == set(first) and set(unfinished(api, tenant_b)) == set(second)

    # When two of A's jobs finish, and A bursts once more
    finish_as_a_worker_would(api, tenant_a, first[:2])
    assert set(unfinished(api, tenant_a)) == set(first[2:])
    third = check_burst(api, burst(api, tenant_a, "a3"), 2)
    # Then exactly the two freed slots were taken: A is back at exactly CAP unfinished jobs
    assert set(unfinished(api, tenant_a)) == set(first[2:]) | set(third)
    assert len(unfinished(api, tenant_a)) == CAP
    assert set(unfinished(api, tenant_b)) == set(second)
