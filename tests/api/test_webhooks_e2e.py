"""Webhooks end to end: `poolq dev up` (Redis, SeaweedFS, the API, real Celery worker processes),
jobs submitted over HTTP with a webhook, their end events delivered by the worker's task to a real
receiver on a loopback port, which verifies each signature with the Standard Webhooks reference
library and the secret `poolq webhooks secret` prints."""
import json
import time

import pytest
from support.dev_stack import dev_stack, poolq
from support.webhook_receiver import receiving

from poolq.api.client.poolq_client import PoolqClient, PoolqError

pytestmark = pytest.mark.integration

DOCUMENTS = [{"id": f"d{i}", "text": f"a short document, number {i}, about signed webhooks"} for i in range(5)]


@pytest.fixture(scope="module")
def receiver():
    with receiving() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def stack(tmp_path_factory, receiver):
    # 127.0.0.1 (an IP literal) permits the loopback receiver; localhost (a name) does not.
    env = {"POOLQ_WEBHOOK_ALLOW": f"http://127.0.0.1:{receiver.port}/hooks, http://localhost:{receiver.port}",
           "POOLQ_WEBHOOK_RETRY_BASE_S": "1"}
    with dev_stack(tmp_path_factory.mktemp("stack"), env=env) as info:
        secret = poolq("--stack", info["dir"], "webhooks", "secret", "--tenant", "dev")
        assert secret.returncode == 0, secret.stderr
        receiver.secret = secret.stdout.strip().splitlines()[-1]
        assert receiver.secret.startswith("whsec_")
        yield info


def _webhook_when_settled(client: PoolqClient, job_id: str, timeout: float = 120) -> dict:
    """The job's status once it ended and its webhook is no longer pending."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.get(job_id)
        if status["status"] in ("succeeded", "failed", "cancelled", "partially_succeeded") \
                and status.get("webhook") and status["webhook"]["state"] != "pending":
            return status
        time.sleep(0.3)
    raise AssertionError(f"job {job_id}: webhook still pending after {timeout} s: {client.get(job_id)}")


def test_a_500_is_retried_by_the_worker_with_the_same_id_and_signed_each_time(stack, receiver):
    receiver.requests.clear()
    receiver.statuses = [500, 200]
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        job = client.submit({"input": {"documents": DOCUMENTS}, "webhook": {"url": receiver.url("/hooks/poolq")}})
        status = _webhook_when_settled(client, job["id"])
    assert status["status"] == "succeeded"
    webhook = status["webhook"]
    assert (webhook["state"], webhook["attempts"], webhook["last_status"], webhook["error"]) == ("delivered", 2, 200, None)
    first, second = receiver.requests
    assert first.verified is True and second.verified is True
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == webhook["event_id"]
    assert first.body == second.body
    assert int(second.headers["webhook-timestamp"]) >= int(first.headers["webhook-timestamp"])
    event = json.loads(second.body)
    assert event["type"] == "job.succeeded"
    assert event["data"]["job_id"] == job["id"] and event["data"]["counts"]["completed"] == len(DOCUMENTS)


def test_a_url_outside_the_allow_list_is_a_422_naming_webhook_url(stack, receiver):
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        for url in (receiver.url("/elsewhere"), "http://169.254.169.254/latest/meta-data/"):
            with pytest.raises(PoolqError) as refused:
                client.submit({"input": {"documents": DOCUMENTS}, "webhook": {"url": url}})
            assert refused.value.status_code == 422
            [error] = refused.value.detail
            assert error["loc"] == ["body", "webhook", "url"] and "allow-list" in error["msg"], error


def test_a_host_resolving_to_loopback_is_refused_by_the_worker_and_the_job_still_succeeds(stack, receiver):
    receiver.requests.clear()
    receiver.statuses = [200]
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        job = client.submit({"input": {"documents": DOCUMENTS}, "webhook": {"url": receiver.url(host="localhost")}})
        status = _webhook_when_settled(client, job["id"])
    assert status["status"] == "succeeded"
    assert status["webhook"]["state"] == "failed" and "loopback address" in status["webhook"]["error"]
    assert receiver.requests == []
