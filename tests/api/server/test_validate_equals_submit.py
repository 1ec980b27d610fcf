"""``POST /v1/jobs/validate`` says what ``POST /v1/jobs`` will say: every refusal of submit
(support/refusals.py) is answered by validate with the same status and the same body, and the
active-job cap as it stands is checked by both."""
import pytest
from fastapi.testclient import TestClient
from support.refusals import GRANTED, OWN, REFUSALS, TENANT_A, TENANT_B, Refusal
from support.security_app import holding_context

from poolq.api.server.app import create_app
from poolq.jobs.settings import Settings


def _client(tmp_path, tenant: str = TENANT_A, **overrides) -> TestClient:
    settings = Settings(store="local", local_store_root=tmp_path / "store", bucket="bucket", output_prefix="jobs",
                        api_key_cache_s=0, allow_file_inputs=False, tenant_input_prefixes={TENANT_A: [GRANTED]},
                        **overrides)
    app = create_app(holding_context(settings), settings, checks=[])
    key, _ = app.state.keys.create(tenant)
    return TestClient(app, headers={"Authorization": f"Bearer {key}"})


@pytest.mark.parametrize("case", REFUSALS, ids=lambda case: case.name[:60])
def test_validate_refuses_every_body_submit_refuses_with_the_same_answer(tmp_path, case: Refusal):
    client = _client(tmp_path, **case.settings)
    submitted = client.post("/v1/jobs", json=case.body)
    assert submitted.status_code == 422, submitted.text
    assert case.loc in [error["loc"] for error in submitted.json()["detail"]], submitted.text
    validated = client.post("/v1/jobs/validate", json=case.body)
    assert (validated.status_code, validated.json()) == (submitted.status_code, submitted.json())
    assert client.get("/v1/jobs").json()["jobs"] == []  # nothing was submitted


def test_what_validate_accepts_submit_accepts(tmp_path):
    client = _client(tmp_path)
    for input_ in ({"uri": f"{OWN}/x.jsonl"}, {"uri": f"{GRANTED}part-1.jsonl"},
                   {"documents": [{"id": "a", "text": "x" * 2_000_000}]}):
        assert client.post("/v1/jobs/validate", json={"input": input_}).json() == {"valid": True}
        assert client.post("/v1/jobs", json={"input": input_}).status_code == 202


def test_another_tenants_upload_area_is_theirs_alone(tmp_path):
    # The same URI: valid for its owner, refused alike by validate and submit for anyone else
    uri = f"s3://bucket/jobs/tenants/{TENANT_B}/uploads/x.jsonl"
    owner, other = _client(tmp_path / "b", TENANT_B), _client(tmp_path / "a", TENANT_A)
    assert owner.post("/v1/jobs/validate", json={"input": {"uri": uri}}).status_code == 200
    refused = [other.post(path, json={"input": {"uri": uri}}) for path in ("/v1/jobs/validate", "/v1/jobs")]
    assert [r.status_code for r in refused] == [422, 422] and refused[0].json() == refused[1].json()


def test_validate_answers_the_active_job_cap_as_it_stands(tmp_path):
    client = _client(tmp_path, max_active_jobs_per_tenant=1)
    body = {"input": {"documents": [{"id": "a", "text": "a document"}]}}
    assert client.post("/v1/jobs/validate", json=body).status_code == 200
    assert client.post("/v1/jobs", json=body).status_code == 202  # held: it stays queued
    validated, submitted = client.post("/v1/jobs/validate", json=body), client.post("/v1/jobs", json=body)
    assert (validated.status_code, validated.json()) == (submitted.status_code, submitted.json())
    assert validated.status_code == 429 and validated.headers["Retry-After"] == submitted.headers["Retry-After"]
