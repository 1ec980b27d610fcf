"""``GET /v1/jobs/{id}/spec`` and ``/error-samples``: what the dashboard's job page reads besides the
status, on an in-process job context; another tenant's job is a 404 like everywhere else."""
import pytest
from support.api_client import authed_client

from poolq.worker.local_runner import local_context


@pytest.fixture
def client(tmp_path, minilm_engine):
    ctx = local_context(tmp_path / "store")
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    return authed_client(ctx)


def _other_tenant(client):
    key, _ = client.app.state.keys.create("other", admin=False)
    return {"Authorization": f"Bearer {key}"}


def test_the_spec_is_the_options_as_submitted(client):
    body = {"input": {"documents": [{"id": "a", "text": "first"}]}, "long_documents": {"mode": "chunked"},
            "output": {"dtype": "float16"}}
    job = client.post("/v1/jobs", json=body).json()
    spec = client.get(f"/v1/jobs/{job['id']}/spec")
    assert spec.status_code == 200
    assert spec.json()["long_documents"]["mode"] == "chunked" and spec.json()["output"]["dtype"] == "float16"
    assert spec.json()["input"]["documents"] == [{"id": "a", "text": "first"}]
    assert client.get(f"/v1/jobs/{job['id']}/spec", headers=_other_tenant(client)).status_code == 404


def test_error_samples_are_grouped_by_code_with_ids(client):
    docs = [{"id": "ok", "text": "fine"}, *({"id": f"long-{i}", "text": "word " * 600} for i in range(4))]
    job = client.post("/v1/jobs", json={"input": {"documents": docs}}).json()
    samples = client.get(f"/v1/jobs/{job['id']}/error-samples", params={"per_code": 2})
    assert samples.status_code == 200, samples.text
    body = samples.json()
    assert body["by_code"] == {"document_too_long": 4}
    kept = body["samples"]["document_too_long"]
    assert len(kept) == 2 and {sample["id"] for sample in kept} <= {f"long-{i}" for i in range(4)}
    assert all("tokens" in sample["message"] for sample in kept)
    assert client.get(f"/v1/jobs/{job['id']}/error-samples", headers=_other_tenant(client)).status_code == 404
    assert client.get(f"/v1/jobs/{job['id']}/error-samples", params={"per_code": 0}).status_code == 422


def test_a_job_without_failures_has_no_samples(client):
    job = client.post("/v1/jobs", json={"input": {"documents": [{"id": "a", "text": "fine"}]}}).json()
    assert client.get(f"/v1/jobs/{job['id']}/error-samples").json()["samples"] == {}
