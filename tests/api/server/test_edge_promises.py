"""The HTTP edge's two promises, where earlier tests do not reach: nothing one tenant sends takes
what another needs (the estimate pool, the embeddings lane's waiting slots), and bad input is a
4xx naming it rather than quietly accepted (an upload body's misspelt field).

In process over a local store whose jobs are accepted and never run (support/security_app.py)."""
from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
from fastapi.testclient import TestClient
from support.security_app import holding_context

from poolq.api.server.app import create_app
from poolq.jobs.lane.lane_messages import EmbeddingReply
from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.jobs.settings import Settings
from poolq.products.estimate import estimator

BODY = {"input": {"documents": [{"id": "a", "text": "a short document"}, {"id": "b", "text": "another one"}]}}
MODEL = "all-MiniLM-L6-v2"


def _app(tmp_path, lane=None, **overrides):
    settings = Settings(store="local", local_store_root=tmp_path / "store", bucket="bucket", output_prefix="jobs",
                        api_key_cache_s=0, allow_file_inputs=False, **overrides)
    return create_app(holding_context(settings), settings, checks=[], lane=lane)


def _client(app, tenant: str) -> TestClient:
    key, _ = app.state.keys.create(tenant)
    return TestClient(app, headers={"Authorization": f"Bearer {key}"})


def test_a_budget_check_at_submit_reads_the_input_inside_the_estimate_pool(tmp_path, monkeypatch):
    # Given an API that computes one estimate at a time (estimate_concurrency), seen from inside each estimate's pass
    app = _app(tmp_path, estimate_concurrency=1)
    client = _client(app, "tenant-a")
    slots_held: list[int] = []
    real_scan = estimator.scan_input

    def recording_scan(ctx, spec, tenant):
        slots_held.append(app.state.estimates.borrowed_tokens)
        return real_scan(ctx, spec, tenant)

    monkeypatch.setattr(estimator, "scan_input", recording_scan)
    # When a job with a token budget is estimated, validated and submitted (each reads and tokenizes its input)
    body = {**BODY, "limits": {"max_tokens": 10_000}}
    answers = {path: client.post(path, json=body).status_code for path in ("/v1/jobs/estimate", "/v1/jobs/validate",
                                                                             "/v1/jobs")}
    assert answers == {"/v1/jobs/estimate": 200, "/v1/jobs/validate": 200, "/v1/jobs": 202}
    # Then every pass ran holding a slot of the estimate pool: a tenant cannot run more at once by
    # submitting budgets instead of asking for estimates (each pass reads for up to estimate_max_seconds)
    assert dict(zip(answers, slots_held)) == dict.fromkeys(answers, 1)


def test_one_tenant_cannot_take_every_embeddings_waiting_slot(tmp_path):
    # Given an API process that waits on 2 embeddings requests at most, and no worker answering yet
    lane = InMemoryEmbeddingLane()
    app = _app(tmp_path, lane=lane, embeddings_max_waiting=2, embeddings_timeout_s=30)
    a, b = _client(app, "tenant-a"), _client(app, "tenant-b")
    answers: dict[str, list] = {"a": [], "b": []}

    def embed(name: str, client: TestClient) -> threading.Thread:
        thread = threading.Thread(target=lambda: answers[name].append(
            client.post("/v1/embeddings", json={"model": MODEL, "input": f"from {name}"})))
        thread.start()
        return thread

    # When tenant a, well within its request rate, sends two requests (each waits on the lane, or is refused)
    threads = [embed("a", a)]
    taken = [lane.take(10)]
    threads.append(embed("a", a))
    taken.append(_arrival(lane, answers["a"]))
    # and tenant b then sends one
    threads.append(embed("b", b))
    taken.append(lane.take(2))  # on the lane if b was let through; nothing comes if b was refused at the door
    vector = EmbeddingReply.of_vectors(np.ones((1, 2), dtype=np.float32), 3, "e")
    for request in filter(None, taken):
        lane.reply(request, vector)
    for thread in threads:
        thread.join(30)
    # Then tenant b is served: tenant a's requests are its own to wait on, not every tenant's
    (answer_b,) = answers["b"]
    assert answer_b.status_code == 200, f"{answer_b.status_code}: {answer_b.text[:300]}"


def _arrival(lane: InMemoryEmbeddingLane, answered: list, wait_s: float = 10.0):
    """The next request to reach ``lane``, or None once ``answered`` holds an answer (it was refused)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if (request := lane.take(0.05)) is not None:
            return request
        if answered:
            return None
    raise AssertionError(f"no request reached the lane or was answered within {wait_s} s")


def test_an_upload_body_with_a_misspelt_field_is_422_naming_it(tmp_path, monkeypatch):
    # Given a store that presigns uploads (S3's; the local store cannot)
    app = _app(tmp_path)
    monkeypatch.setattr(app.state.ctx.store, "presigned_put_url", lambda key, expires: f"https://store.test/{key}",
                        raising=False)
    client = _client(app, "tenant-a")
    assert client.post("/v1/uploads", json={"format": "parquet"}).json()["uri"].endswith(".parquet")
    # When the body misspells format, the caller meaning a Parquet upload
    response = client.post("/v1/uploads", json={"fromat": "parquet"})
    # Then it is refused naming the field (as every other body of the API is), not a .jsonl key handed out
    assert response.status_code == 422, f"{response.status_code}: {response.text[:300]}"
    assert ["body", "fromat"] in [error["loc"] for error in response.json()["detail"]]


def _on_an_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_the_estimates_model_pin_runs_off_the_event_loop(tmp_path, monkeypatch):
    # Given an API whose model registry notes where it is asked to pin a model (for a Hub id: a
    # download of its description files from the Hub, every time for an unpinned revision)
    app = _app(tmp_path)
    registry = app.state.ctx.registry
    pinned_on_loop: list[bool] = []
    real_canonical = registry.canonical

    def recording_canonical(name: str) -> str:
        pinned_on_loop.append(_on_an_event_loop())
        return real_canonical(name)

    monkeypatch.setattr(registry, "canonical", recording_canonical)
    # When a job is estimated
    assert _client(app, "tenant-a").post("/v1/jobs/estimate", json=BODY).status_code == 200
    # Then its model was pinned on a thread: a slow Hub stalls this estimate, not every tenant's requests
    assert pinned_on_loop == [False]
