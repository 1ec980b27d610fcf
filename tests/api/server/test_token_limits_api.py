"""The budget's answers over HTTP: a tenant past its daily tokens gets 429 with ``Retry-After`` to
midnight UTC on submit and validate alike (another tenant does not); a job asking more than the
operator's per-job ceiling gets 422 at ``limits.max_tokens``."""
from datetime import datetime, timezone

from fastapi.testclient import TestClient
from support.security_app import holding_context

from poolq.api.server.app import create_app
from poolq.jobs.coordination.tenant_day_usage import seconds_to_day_end
from poolq.jobs.settings import Settings

BODY = {"input": {"documents": [{"id": "a", "text": "a document"}]}}


def _app(tmp_path, **overrides):
    settings = Settings(store="local", local_store_root=tmp_path / "store", bucket="bucket", output_prefix="jobs",
                        api_key_cache_s=0, **overrides)
    ctx = holding_context(settings)
    return create_app(ctx, settings, checks=[]), ctx


def _client(app, tenant: str) -> TestClient:
    key, _ = app.state.keys.create(tenant)
    return TestClient(app, headers={"Authorization": f"Bearer {key}"})


def test_a_tenant_past_its_daily_tokens_gets_429_until_midnight_utc(tmp_path):
    app, ctx = _app(tmp_path, tenant_max_tokens_per_day=1000)
    acme, other = _client(app, "acme"), _client(app, "other")
    assert acme.post("/v1/jobs", json=BODY).status_code == 202
    ctx.day_usage.add("acme", "job/shard-00000", 1000, datetime.now(timezone.utc))  # a worker's commits, counted
    for path in ("/v1/jobs", "/v1/jobs/validate"):
        refused = acme.post(path, json=BODY)
        assert refused.status_code == 429 and "daily limit is 1000" in refused.text
        expected = seconds_to_day_end(datetime.now(timezone.utc))
        assert expected - 5 <= int(refused.headers["Retry-After"]) <= expected
    assert other.post("/v1/jobs", json=BODY).status_code == 202


def test_a_job_over_the_per_job_ceiling_is_refused_at_its_field(tmp_path):
    app, _ = _app(tmp_path, tenant_max_tokens_per_job=500)
    refused = _client(app, "acme").post("/v1/jobs", json={**BODY, "limits": {"max_tokens": 501}})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "limits", "max_tokens"]
