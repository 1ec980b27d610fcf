"""The HTTP contract, on an in-process job context (the stack test covers the real services)."""
import re
from dataclasses import replace

import pytest
from support.api_client import authed_client

from poolq.jobs.coordination.enqueuer import Enqueuer
from poolq.jobs.coordination.leases import InMemoryLeaseStore
from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.engine_pool import EnginePool
from poolq.jobs.settings import Settings
from poolq.worker.local_runner import local_context


@pytest.fixture
def client(tmp_path, minilm_engine):
    ctx = local_context(tmp_path / "store")
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    return authed_client(ctx)


class _HoldingEnqueuer(Enqueuer):
    """Accepts work and never runs it: jobs stay queued."""

    def plan(self, job_id): ...
    def plan_section(self, job_id, stage, section): ...
    def run_shard(self, job_id, shard): ...
    def finalize(self, job_id): ...


def test_submit_poll_and_fetch_results(client):
    body = {"input": {"documents": [{"id": "a", "text": "first document"}, {"id": "b", "text": "second one"}]}}
    response = client.post("/v1/jobs", json=body)
    assert response.status_code == 202
    job = response.json()
    assert job["status"] == "queued" and response.headers["Location"].endswith(f"/v1/jobs/{job['id']}")
    polled = client.get(f"/v1/jobs/{job['id']}").json()
    assert polled["status"] == "succeeded"
    assert polled["counts"] == {"total": 2, "completed": 2, "failed": 0, "not_processed": 0}
    assert polled["rates"]["tokens_per_s"] > 0 and polled["rates"]["eta_s"] == 0.0
    assert polled["result"]["manifest_uri"].endswith(f"{job['id']}/manifest.json")
    results = client.get(f"/v1/jobs/{job['id']}/results").json()
    assert [part["rows"] for part in results["parts"]] == [2]
    assert re.search(r"/parts/part-00000\.[0-9a-f]{16}\.parquet$", results["parts"][0]["key"]) and results["parts"][0]["url"]
    assert results["errors"]["count"] == 0 and results["dimensions"] == 384


def test_unknown_job_is_404(client):
    assert client.get("/v1/jobs/does-not-exist").status_code == 404
    assert client.get("/v1/jobs/does-not-exist/results").status_code == 404


@pytest.mark.parametrize(
    "body, loc",
    [
        ({}, ["body", "input"]),
        ({"input": {"documents": [{"text": "x"}]}}, ["body", "input", "InlineInput", "documents", 0, "id"]),
        ({"input": {"documents": []}, "model": "x"}, ["body", "input", "InlineInput", "documents"]),
        ({"input": {"documents": [{"id": "a", "text": "x"}]}, "task": "rerank"}, ["body", "task"]),
        ({"input": {"documents": [{"id": "a", "text": "x"}]}, "model": "no-such-model"}, ["body", "model"]),
        ({"input": {"documents": [{"id": "a", "text": "x"}]}, "long_documents": {"mode": "squash"}},
         ["body", "long_documents", "mode"]),
        ({"input": {"documents": [{"id": "a", "text": "x"}]}, "long_documents": {"window_tokens": 4096}},
         ["body", "long_documents", "window_tokens"]),
        ({"input": {"uri": "http://example.com/x.jsonl"}}, ["body", "input", "uri"]),
    ],
)
def test_invalid_bodies_are_422_naming_the_field(client, body, loc):
    response = client.post("/v1/jobs", json=body)
    assert response.status_code == 422
    assert loc in [error["loc"] for error in response.json()["detail"]]


def test_results_before_the_job_finishes_are_409(tmp_path):
    settings = Settings(store="local", local_store_root=tmp_path)
    ctx = local_context(tmp_path)
    ctx = replace(ctx, settings=settings, status=InMemoryJobStatusStore(), leases=InMemoryLeaseStore(),
                  enqueuer=_HoldingEnqueuer())
    client = authed_client(ctx, settings)
    job = client.post("/v1/jobs", json={"input": {"documents": [{"id": "a", "text": "x"}]}}).json()
    response = client.get(f"/v1/jobs/{job['id']}/results")
    assert response.status_code == 409 and "queued" in response.json()["detail"]


def test_a_gguf_model_job_is_validated_from_its_header_without_converting_it(tmp_path, monkeypatch):
    # Given an API whose GGUF cache is empty (a fresh server), and a conversion that must not run
    from poolq.engine.loading.registry import ModelRegistry

    monkeypatch.setattr("poolq.engine.loading.gguf_cache._convert", lambda *_: pytest.fail("the API converted a GGUF model"))
    settings = Settings(store="local", local_store_root=tmp_path)
    base = local_context(tmp_path)
    registry = ModelRegistry.with_packaged_models(cache_root=tmp_path / "gguf-cache")
    ctx = replace(base, settings=settings, status=InMemoryJobStatusStore(), leases=InMemoryLeaseStore(),
                  enqueuer=_HoldingEnqueuer(), registry=registry, engines=EnginePool(registry, settings.serving.engine_config()))
    client = authed_client(ctx, settings)
    documents = {"documents": [{"id": "a", "text": "x"}]}
    # When jobs for SmolLM2 (8k context) are submitted
    accepted = client.post("/v1/jobs", json={"input": documents, "model": "smollm2-135m"})
    too_wide = client.post("/v1/jobs", json={
        "input": documents, "model": "smollm2-135m", "long_documents": {"window_tokens": 9000}})
    # Then the header's window decides, and nothing was converted
    assert accepted.status_code == 202, accepted.text
    assert too_wide.status_code == 422 and "8192" in too_wide.text
    assert ["body", "long_documents", "window_tokens"] in [error["loc"] for error in too_wide.json()["detail"]]
    assert not (tmp_path / "gguf-cache").exists()


def test_a_partially_failed_job_says_why_by_code_and_with_its_first_messages(client):
    # Given a job with one record over the model's window
    docs = [{"id": "ok", "text": "fine"}, {"id": "long", "text": "word " * 600}]
    job = client.post("/v1/jobs", json={"input": {"documents": docs}})
    assert job.status_code == 202
    polled = client.get(f"/v1/jobs/{job.json()['id']}").json()
    # Then the status counts the failure by code and quotes it
    assert polled["status"] == "partially_succeeded" and polled["errors_by_code"] == {"document_too_long": 1}
    assert len(polled["error_samples"]) == 1 and "long_documents" in polled["error_samples"][0]
    manifest = client.get(f"/v1/jobs/{job.json()['id']}/results").json()["manifest"]
    assert manifest["errors"]["by_code"] == {"document_too_long": 1} and manifest["errors"]["samples"]


def test_a_job_whose_every_record_failed_names_the_cause(client):
    body = {"input": {"documents": [{"id": f"long-{i}", "text": "word " * 600} for i in range(3)]}}
    job = client.post("/v1/jobs", json=body).json()
    polled = client.get(f"/v1/jobs/{job['id']}").json()
    assert polled["status"] == "failed" and polled["errors_by_code"] == {"document_too_long": 3}
    assert polled["error"].startswith("every record failed: 3 document_too_long; first: ") and "tokens" in polled["error"]


def test_validate_runs_the_submission_checks_and_submits_nothing(client):
    # (a URI outside the caller's uploads is refused by both: test_validate_equals_submit.py)
    good = {"input": {"documents": [{"id": "a", "text": "a document"}]}, "long_documents": {"mode": "truncate"}}
    assert client.post("/v1/jobs/validate", json=good).json() == {"valid": True}
    bad = client.post("/v1/jobs/validate", json={**good, "long_documents": {"mode": "chunk"}})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][:2] == ["body", "long_documents"]
    wrong_model = client.post("/v1/jobs/validate", json={**good, "model": "no-such-model"})
    assert wrong_model.status_code == 422 and wrong_model.json()["detail"][0]["loc"] == ["body", "model"]
    assert client.get("/v1/jobs").json()["jobs"] == []  # nothing was submitted
