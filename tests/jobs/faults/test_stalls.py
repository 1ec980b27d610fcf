"""Stalls, beside the crashes of test_outage_chaos.py: the object store, and separately Redis, is
frozen with SIGSTOP (it keeps its sockets: connections open, nothing is answered) while a job runs.

While it is frozen, every route of the API, called at once, answers within 10 s: 503 with
``Retry-After`` wherever the route needs the frozen service (``/v1/*`` read the caller's key from
the store, the key cache is off here, and take a rate-limit token in Redis; ``/readyz`` probes
both), and its usual answer where it does not (``/healthz``; ``/metrics`` reads Redis only). After
SIGCONT the job started before the stall ends with every record exactly once (``check_outcome``).
The workers' deadlines are shortened here below the stall, so their calls time out and are
retried as in an outage.
"""
from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SLOW_S = 0.5  # per document: the job is still running when the stall begins
STALL_S = 12  # how long the service stays frozen: longer than the workers' deadlines below
ANSWER_WITHIN_S = 10
UNKNOWN_ID = "0" * 32
OVERRIDES = {
    "api_key_cache_s": 0,  # every request reads its key from the store
    "s3_worker_read_timeout_s": 3,
    "redis_worker_timeout_s": 3,
    # Retries that outlast the stall (as in production), and time limits longer than it.
    "task_retry_backoff_s": 1,
    "task_retry_backoff_max_s": 16,
    "task_soft_time_limit_s": 30,
    "task_time_limit_s": 35,
    "visibility_timeout_s": 75,
    "rate_limit_per_s": 1000,
    "rate_limit_burst": 100000,
}
SPEC = {"input": {"documents": [{"id": "a", "text": "a document"}]}, "long_documents": {"mode": "truncate"}}
BODIES = {
    ("POST", "/v1/jobs"): {"json": SPEC},
    ("POST", "/v1/jobs/validate"): {"json": SPEC},
    ("POST", "/v1/uploads"): {"json": {"filename": "corpus.jsonl"}},
    ("POST", "/v1/files"): {"files": {"file": ("in.jsonl", b'{"custom_id": "a"}\n')}, "data": {"purpose": "batch"}},
    ("POST", "/v1/embeddings"): {"json": {"input": "hello", "model": "all-MiniLM-L6-v2"}},
}


@dataclass
class Answer:
    route: str
    status: int | None
    retry_after: str | None
    seconds: float
    error: str = ""


def _routes(api_url: str) -> list[tuple[str, str]]:
    """(method, path) of every route the running API documents."""
    paths = httpx.get(f"{api_url}/openapi.json", timeout=10).json()["paths"]
    return [(method.upper(), path) for path, item in paths.items() for method in item]


def _call(api_url: str, key: str, method: str, path: str, job_id: str) -> Answer:
    # GETs of the job started before the stall; anything that would change something names no object.
    concrete = path.replace("{job_id}", job_id if method == "GET" else UNKNOWN_ID)
    for name in ("{schedule_id}", "{file_id}", "{batch_id}"):
        concrete = concrete.replace(name, UNKNOWN_ID)
    started = time.monotonic()
    try:
        response = httpx.request(method, f"{api_url}{concrete}", headers={"Authorization": f"Bearer {key}"},
                                 timeout=60, **BODIES.get((method, path), {"json": {}} if method == "POST" else {}))
    except httpx.HTTPError as exc:
        return Answer(f"{method} {path}", None, None, time.monotonic() - started, f"{type(exc).__name__}: {exc}")
    return Answer(f"{method} {path}", response.status_code, response.headers.get("Retry-After"),
                  time.monotonic() - started, response.text[:200])


def _expected(route: str, frozen: str) -> int:
    if route == "GET /healthz":
        return 200
    if route == "GET /metrics":
        return 503 if frozen == "redis" else 200
    return 503


@pytest.mark.settings(**OVERRIDES)
@pytest.mark.parametrize("frozen", ["store", "redis"])
def test_a_stalled_dependency_is_a_503_within_seconds_on_every_route_and_the_job_ends_exactly(
        frozen, own_store_deployment, chaos_seaweed, documents, reference):
    deployment = own_store_deployment
    # Given the API, beat and a slow worker, and a job whose documents are going through the model
    api_url = deployment.start_api()
    worker = deployment.start_worker("w1", slow_s=SLOW_S, wait=False)
    beat = deployment.start_beat()
    deployment.wait_ready(worker)
    key, routes = deployment.api_key, _routes(api_url)
    assert len(routes) >= 20, routes
    job_id = deployment.submit(documents)
    deployment.wait_shard_lease(job_id)
    deployment.wait_started_embedding()

    # When the store (or Redis) is frozen, and every route is called at once
    pid = (chaos_seaweed if frozen == "store" else deployment.redis).running_pid()
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        with ThreadPoolExecutor(len(routes)) as pool:
            answers = list(pool.map(lambda route: _call(api_url, key, *route, job_id), routes))
        time.sleep(max(0.0, STALL_S - (time.monotonic() - frozen_at)))
    finally:
        os.kill(pid, signal.SIGCONT)

    # Then each route answered within 10 s: 503 with Retry-After where it needs the frozen service
    report = "\n".join(f"  {a.route}: {a.status} retry-after={a.retry_after} in {a.seconds:.1f} s {a.error}"
                       for a in answers)
    bad = [a for a in answers if a.status != _expected(a.route, frozen) or a.seconds > ANSWER_WITHIN_S
           or (a.status == 503 and not (a.retry_after or "").isdigit())]
    assert not bad, f"while the {frozen} was frozen:\n{report}{deployment.logs()}"
    assert sum(a.status == 503 for a in answers) >= len(answers) - 2
    print(f"while the {frozen} was frozen:\n{report}")
    # ... and the job started before the stall ends with every record exactly once
    deployment.check_outcome(job_id, documents, reference, timeout=180)
    assert worker.alive() and beat.exit_code in (None, 0)
