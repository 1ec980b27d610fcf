"""`poolq submit --reuse --sink --webhook`: the options land in the job the server keeps, and the server's
refusal of a sink the tenant may not use comes back naming the option's field."""
import json

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from support.api_client import InProcessTransport, authed_client

from poolq.api.cli import output
from poolq.api.cli.main import main
from poolq.api.client.poolq_client import PoolqClient
from poolq.jobs.settings import Settings
from poolq.worker.local_runner import local_context

WEBHOOK = "https://hooks.example.com/poolq"


@pytest.fixture
def submit(tmp_path, minilm_engine, monkeypatch):
    """``submit(*options)``: `poolq submit` of three documents, against an in-process API whose one sink,
    search-db, is granted to the local tenant; returns the CLI's result and the API's test client."""
    settings = Settings(sinks={"search-db": "memory://search"}, sink_grants={"local": ["search-db"]},
                        webhook_allow=WEBHOOK)
    ctx = local_context(tmp_path / "store", settings)
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    client = authed_client(ctx)
    # The CLI's requests reach the app through a client with no key of its own: only --api-key authenticates them.
    keyless = TestClient(client.app)
    monkeypatch.setattr(output, "PoolqClient", lambda url, key: PoolqClient(
        url, key, transport=InProcessTransport(keyless)))
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": f"d{i}", "text": f"document {i}"}) + "\n" for i in range(3)))

    def run(*options: str):
        return CliRunner().invoke(main, ["submit", source.as_uri(), "--api-url", "http://testserver",
                                          "--api-key", client.api_key, *options]), client

    return run


def test_reuse_sink_and_webhook_are_the_jobs(submit):
    result, client = submit("--reuse", "tenant", "--sink", "search-db", "--webhook", WEBHOOK)
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    spec = client.get(f"/v1/jobs/{job_id}/spec").json()
    assert (spec["reuse"], spec["sink"], spec["webhook"]["url"]) == ("tenant", "search-db", WEBHOOK)
    # and the job did what they say: its rows went to the sink, its end event was made for the webhook
    # (in-process runs deliver none: a service's workers do), its outputs were offered to the tenant's store
    [loaded] = client.get(f"/v1/jobs/{job_id}/results").json()["sinks"]
    assert (loaded["name"], loaded["state"], loaded["upserted"]) == ("search-db", "succeeded", 3)
    status = client.get(f"/v1/jobs/{job_id}").json()
    assert status["webhook"]["type"] == "job.succeeded" and status["reuse"]["computed_tokens"] > 0


def test_without_the_options_the_servers_defaults_hold(submit):
    result, client = submit()
    assert result.exit_code == 0, result.output
    spec = client.get(f"/v1/jobs/{result.stdout.strip()}/spec").json()
    assert (spec["reuse"], spec.get("sink"), spec.get("webhook")) == ("job", None, None)


def test_a_sink_not_granted_is_refused_naming_the_field(submit):
    result, _ = submit("--sink", "elsewhere")
    assert result.exit_code == int(output.ExitCode.REFUSED), result.output
    assert "sink" in result.output


def test_an_unknown_reuse_mode_is_a_usage_error(submit):
    result, _ = submit("--reuse", "everyone")
    assert result.exit_code == 2 and "--reuse" in result.output


def test_webhook_running_asks_for_job_running_and_needs_a_webhook(submit):
    result, client = submit("--webhook", WEBHOOK, "--webhook-running")
    assert result.exit_code == 0, result.output
    spec = client.get(f"/v1/jobs/{result.stdout.strip()}/spec").json()
    assert spec["webhook"] == {**spec["webhook"], "url": WEBHOOK, "send_running": True}
    alone, _ = submit("--webhook-running")
    assert alone.exit_code == 2 and "--webhook-running needs --webhook URL" in alone.output
