"""``poolq models`` against an in-process API (what GET /v1/models serves, as lines and as JSON), and
``poolq models pull`` into an offline Hub cache (the commit printed; refused, naming why)."""
import json

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from support.api_client import InProcessTransport, authed_client
from support.hub_cache import offline_hub, publish, tiny_st_bert

from poolq.api.cli import output
from poolq.api.cli.main import main
from poolq.api.client.poolq_client import PoolqClient
from poolq.jobs.settings import Settings
from poolq.worker.local_runner import local_context

REPO = "test-org/tiny-bert"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    home = offline_hub(monkeypatch, tmp_path / "hf")
    return home, publish(home, REPO, tiny_st_bert(tmp_path / "model", seed=7))


def test_models_lists_what_the_server_serves(tmp_path, hub, minilm_engine, monkeypatch):
    ctx = local_context(tmp_path / "store", Settings(models_allow="test-org/*"))
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    client = authed_client(ctx)
    monkeypatch.setattr(output, "PoolqClient", lambda url, key: PoolqClient(
        url, key, transport=InProcessTransport(TestClient(client.app))))
    args = ["--api-url", "http://testserver", "--api-key", client.api_key]
    lines = CliRunner().invoke(main, ["models", "list", *args])
    assert lines.exit_code == 0, lines.output
    assert f"{REPO}  tasks embed,token_embed  dim 32  window 128  pooling MEAN" in lines.output
    as_json = CliRunner().invoke(main, ["models", "list", "--json", *args])
    assert REPO in [model["id"] for model in json.loads(as_json.output)["data"]]


def test_pull_prints_the_commit_and_refuses_what_poolq_would_not_load(hub, tmp_path):
    home, commit = hub
    pulled = CliRunner().invoke(main, ["models", "pull", REPO])
    assert pulled.exit_code == 0, pulled.output
    assert pulled.output.startswith(f"{REPO}@{commit}  ")
    missing = CliRunner().invoke(main, ["models", "pull", "test-org/absent"])
    assert missing.exit_code == 1 and "not in this host's Hub cache" in missing.output
    bad = CliRunner().invoke(main, ["models", "pull", "no-slash"])
    assert bad.exit_code == 2 and "is not a Hub id" in bad.output


def test_embed_takes_a_hub_id_and_a_prompt_name(hub, tmp_path, monkeypatch):
    monkeypatch.delenv("POOLQ_MODELS_ALLOW", raising=False)
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": f"d{i}", "text": f"document {i}"}) + "\n" for i in range(3)))
    run = CliRunner().invoke(main, ["embed", str(source), "--out", str(tmp_path / "out"), "--model", REPO,
                                    "--prompt", "query: ", "--json"])
    assert run.exit_code == 0, run.output
    status = json.loads(run.output)
    assert status["status"] == "succeeded" and status["model"] == f"{REPO}@{hub[1]}"
