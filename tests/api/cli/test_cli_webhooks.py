"""`poolq webhooks secret`: made on first use, the same until rotated; a rotation keeps the old one signing."""
import json
import time

from click.testing import CliRunner

from poolq.api.cli.main import main
from poolq.products.webhooks.webhook_secrets import WebhookSecretStore
from poolq.storage import LocalObjectStore


def _cli(tmp_path, *args):
    env = {"POOLQ_STORE": "local", "POOLQ_LOCAL_STORE_ROOT": str(tmp_path), "POOLQ_WEBHOOK_SECRET_OVERLAP_S": "3600"}
    return CliRunner().invoke(main, ["webhooks", "secret", *args], env=env)


def test_the_secret_is_made_once_shown_again_and_rotated_with_an_overlap(tmp_path):
    first = _cli(tmp_path, "--tenant", "acme")
    assert first.exit_code == 0, first.output
    secret = first.stdout.strip().splitlines()[-1]
    assert secret.startswith("whsec_")
    assert _cli(tmp_path, "--tenant", "acme").stdout.strip().splitlines()[-1] == secret
    assert _cli(tmp_path, "--tenant", "other").stdout.strip().splitlines()[-1] != secret

    rotated = _cli(tmp_path, "--tenant", "acme", "--rotate", "--json")
    assert rotated.exit_code == 0, rotated.output
    shown = json.loads(rotated.stdout)
    assert shown["previous"]["secret"] == secret and shown["current"]["secret"] != secret
    assert 3500 < shown["previous"]["retired_at"] - time.time() <= 3600
    stored = WebhookSecretStore(LocalObjectStore(tmp_path), "jobs").get("acme")
    assert stored.signing(time.time()) == [shown["current"]["secret"], secret]
    assert stored.signing(time.time() + 3601) == [shown["current"]["secret"]]


def test_a_tenant_name_that_is_not_one_is_a_usage_error(tmp_path):
    result = _cli(tmp_path, "--tenant", "Not A Tenant")
    assert result.exit_code == 2 and "--tenant" in result.output


def test_poolq_status_shows_the_webhook_outcome():
    from support.job_statuses import job_status

    from poolq.api.cli.output import job_details

    job = {"id": "j1", "status": "succeeded", "model": "m", "counts": {"total": 1, "completed": 1, "failed": 0},
           "usage": {"tokens": 3}}
    assert not any("webhook" in line for line in job_details(job_status(job)))
    pending = {"event_id": "msg_1", "type": "job.succeeded", "state": "pending", "attempts": 1, "last_status": 500,
               "error": "HTTP 500: boom"}
    assert job_details(job_status({**job, "webhook": pending}))[-1] == \
        "  webhook    job.succeeded pending after 1 attempt(s): HTTP 500: boom"
