"""The /v1/schedules HTTP contract, on an in-process job context (runs finish inside the request)."""
import json

import pytest
from support.api_client import InProcessTransport, authed_client

from poolq.api.client.poolq_client import PoolqClient, PoolqError


@pytest.fixture
def ctx(local_ctx):
    return local_ctx


@pytest.fixture
def client(ctx):
    return authed_client(ctx)


@pytest.fixture
def prefix(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    lines = (json.dumps({"id": f"d{i}", "text": f"document number {i}"}) + "\n" for i in range(3))
    (docs / "part-1.jsonl").write_text("".join(lines))
    return docs.as_uri() + "/"


def test_create_list_get_run_and_delete(client, prefix):
    body = {"cron": "0 3 * * *", "input": {"uri": prefix}, "template": {"long_documents": {"mode": "truncate"}}}
    response = client.post("/v1/schedules", json=body)
    assert response.status_code == 201, response.text
    schedule = response.json()
    assert response.headers["Location"].endswith(f"/v1/schedules/{schedule['id']}")
    assert schedule["cron"] == "0 3 * * *" and schedule["timezone"] == "UTC" and schedule["enabled"]
    assert schedule["template"]["long_documents"]["mode"] == "truncate" and schedule["template"]["model"]
    assert client.get("/v1/schedules").json() == {"schedules": [schedule]}
    assert client.get(f"/v1/schedules/{schedule['id']}").json() == {**schedule, "runs": []}
    # Run now: a job over the prefix, then a second, incremental from the first
    first = client.post(f"/v1/schedules/{schedule['id']}/run")
    assert first.status_code == 202 and first.json()["status"] == "succeeded" and first.json()["manual"]
    job = client.get(f"/v1/jobs/{first.json()['job_id']}").json()
    assert job["counts"] == {"total": 3, "completed": 3, "failed": 0, "not_processed": 0}
    detail = client.get(f"/v1/schedules/{schedule['id']}").json()
    assert [(run["job_id"], run["status"]) for run in detail["runs"]] == [(job["id"], "succeeded")]
    # Delete: 204, then it is gone (and a second delete is 404); its jobs stay
    assert client.delete(f"/v1/schedules/{schedule['id']}").status_code == 204
    assert client.get(f"/v1/schedules/{schedule['id']}").status_code == 404
    assert client.delete(f"/v1/schedules/{schedule['id']}").status_code == 404
    assert client.post(f"/v1/schedules/{schedule['id']}/run").status_code == 404
    assert client.get("/v1/schedules").json() == {"schedules": []}
    assert client.get(f"/v1/jobs/{job['id']}").json()["status"] == "succeeded"


@pytest.mark.parametrize("body, loc", [
    ({"input": {"uri": "s3://b/docs/"}}, ["body", "cron"]),
    ({"cron": "* * *", "input": {"uri": "s3://b/docs/"}}, ["body", "cron"]),
    ({"cron": "0 0 1 * mon", "input": {"uri": "s3://b/docs/"}}, ["body", "cron"]),
    ({"cron": "* * * * *", "input": {"uri": "s3://b/docs/"}, "timezone": "Asia/Tokyo"}, ["body", "timezone"]),
    ({"cron": "* * * * *"}, ["body", "input"]),
    ({"cron": "* * * * *", "input": {"documents": [{"id": "a", "text": "x"}]}}, ["body", "input", "uri"]),
    ({"cron": "* * * * *", "input": {"uri": "http://example.com/x/"}}, ["body", "input", "uri"]),
    ({"cron": "* * * * *", "input": {"uri": "s3://b/docs/"}, "template": {"model": "nope"}}, ["body", "template", "model"]),
    ({"cron": "* * * * *", "input": {"uri": "s3://b/docs/"}, "template": {"input": {}}}, ["body", "template", "input"]),
    ({"cron": "* * * * *", "input": {"uri": "s3://b/docs/"}, "template": {"long_documents": {"window_tokens": 4096}}},
     ["body", "template", "long_documents", "window_tokens"]),
])
def test_invalid_bodies_are_422_naming_the_field(client, body, loc):
    response = client.post("/v1/schedules", json=body)
    assert response.status_code == 422
    assert loc in [error["loc"] for error in response.json()["detail"]], response.json()


def test_unknown_or_malformed_ids_are_404(client):
    for schedule_id in ("0" * 32, "not-an-id", "..%2F..%2Fetc"):
        assert client.get(f"/v1/schedules/{schedule_id}").status_code == 404
        assert client.delete(f"/v1/schedules/{schedule_id}").status_code == 404


def test_the_python_client(client, prefix):
    with PoolqClient("http://testserver", transport=InProcessTransport(client)) as poolq:
        schedule = poolq.create_schedule({"cron": "*/5 * * * *", "input": {"uri": prefix}})
        assert [s["id"] for s in poolq.list_schedules()] == [schedule["id"]]
        run = poolq.run_schedule(schedule["id"])
        assert run["status"] == "succeeded" and poolq.get_schedule(schedule["id"])["runs"][0]["job_id"] == run["job_id"]
        assert poolq.delete_schedule(schedule["id"]) is None
        with pytest.raises(PoolqError) as info:
            poolq.get_schedule(schedule["id"])
        assert info.value.status_code == 404


