"""``GET /v1/models`` and Hub ids over the API, in process, offline: OpenAI's list shape with poolq's
fields (tried with the official openai client), a Hub id the operator allows validated and estimated
from its description files only (no weights file is ever opened by the API), refused outside the
allow-list, and a job that names it computed with the commit pinned at acceptance."""
import json
import os
import sys
import threading
from pathlib import Path

import httpx
import numpy as np
import openai
import pyarrow as pa
import pytest
from support.api_client import InProcessTransport, authed_client
from support.hub_cache import hf_hub_repo, offline_hub, publish, tiny_st_bert

from poolq.engine import PoolingEngine
from poolq.jobs.coordination.worker_model_stats import WorkerModelStats
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.storage import read_part
from poolq.worker.local_runner import local_context

REPO = "test-org/tiny-bert"
DOCS = {"documents": [{"id": "a", "text": "rivers and lakes"}, {"id": "b", "text": "mountains"}]}
_OPENED: list[str] = []
_WATCHING = threading.Event()


def _record_opens(event, args):
    if _WATCHING.is_set() and event == "open" and args and isinstance(args[0], str | bytes):
        _OPENED.append(str(args[0]))


sys.addaudithook(_record_opens)  # audit hooks cannot be removed: it records only while _WATCHING is set


@pytest.fixture
def served(tmp_path, monkeypatch, minilm_engine):
    home = offline_hub(monkeypatch, tmp_path / "hf")
    commit = publish(home, REPO, tiny_st_bert(tmp_path / "model", seed=7))
    ctx = local_context(tmp_path / "store", Settings(models_allow="test-org/*"))
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    return ctx, authed_client(ctx), commit


def test_models_are_listed_in_openais_shape_with_poolqs_fields(served):
    _, client, _ = served
    response = client.get("/v1/models")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list"
    by_id = {model["id"]: model for model in body["data"]}
    assert {"all-MiniLM-L6-v2", REPO} <= set(by_id)
    hub = by_id[REPO]
    assert (hub["object"], hub["owned_by"], hub["dimensions"], hub["pooling"]) == ("model", "test-org", 32, "MEAN")
    assert hub["tasks"] == ["embed", "token_embed"] and hub["window"] == 128 and hub["created"] > 0
    assert by_id["all-MiniLM-L6-v2"]["owned_by"] == "poolq"


def test_each_model_says_what_the_live_workers_hold_of_it(served):
    ctx, client, commit = served
    for worker in ("w1", "w2"):
        ctx.workers.heartbeat(worker, ttl_s=60)
    ctx.workers.report_models("w1", [WorkerModelStats("all-MiniLM-L6-v2", "float32", 2, 1, 1.5, 1000, True),
                                     WorkerModelStats(f"{REPO}@{commit}", "float32", 1, 0, 0.5, 70, True)], ttl_s=60)
    ctx.workers.report_models("w2", [WorkerModelStats("all-MiniLM-L6-v2", "float32", 1, 0, 1.0, 1000, True),
                                     WorkerModelStats(REPO, "float32", 1, 1, 0.5, 30, False)], ttl_s=60)
    by_id = {model["id"]: model for model in client.get("/v1/models").json()["data"]}
    fields = ("loaded", "loaded_workers", "resident_bytes", "loads", "evictions")
    assert [by_id["all-MiniLM-L6-v2"][field] for field in fields] == [True, 2, 2000, 3, 1]
    # the Hub id with its pinned commit's loads: held by w1; w2 unloaded it (no bytes, still counted)
    assert [by_id[REPO][field] for field in fields] == [True, 1, 70, 2, 1]


def test_the_official_openai_client_lists_them(served):
    _, client, _ = served
    http_client = httpx.Client(transport=InProcessTransport(client), base_url="http://testserver")
    listed = openai.OpenAI(api_key=client.api_key, base_url="http://testserver/v1", http_client=http_client).models.list()
    assert REPO in [model.id for model in listed.data]


def test_the_api_validates_and_estimates_a_hub_model_without_opening_weights(served, monkeypatch):
    _, client, commit = served

    def no_weights(*args):  # online, fetching the weights' snapshot would download them into the API host
        raise AssertionError("the API asked for the model's weights")

    monkeypatch.setattr("poolq.engine.loading.hub.weights_dir", no_weights)
    _OPENED.clear()
    _WATCHING.set()
    try:
        validated = client.post("/v1/jobs/validate", json={"model": REPO, "input": DOCS})
        estimated = client.post("/v1/jobs/estimate", json={"model": REPO, "input": DOCS})
        listed = client.get("/v1/models")
    finally:
        _WATCHING.clear()
    assert (validated.status_code, estimated.status_code, listed.status_code) == (200, 200, 200), estimated.text
    assert any(path.endswith("config.json") for path in _OPENED)  # the recorder sees the files it reads
    assert not [path for path in _OPENED if path.endswith((".safetensors", ".bin", ".pt"))]


def test_an_id_outside_the_allow_list_is_a_422_naming_it(served):
    _, client, _ = served
    response = client.post("/v1/jobs/validate", json={"model": "other-org/model", "input": DOCS})
    assert response.status_code == 422
    assert "other-org/model" in response.text and "not allowed" in response.text


def test_a_job_naming_a_hub_id_runs_pinned_to_the_commit_accepted(served):
    ctx, client, commit = served
    accepted = client.post("/v1/jobs", json={"model": REPO, "input": DOCS})
    assert accepted.status_code == 202, accepted.text
    job = client.get(f"/v1/jobs/{accepted.json()['id']}").json()
    assert job["status"] == "succeeded", job
    assert job["model"] == f"{REPO}@{commit}"
    manifest = json.loads(ctx.store.get(JobHandle.bind(ctx, job["id"]).layout.manifest))
    assert manifest["engine"]["revision"] == f"hf:{REPO}@{commit}"
    table = pa.concat_tables([read_part(ctx.store.get(part["key"])) for part in manifest["parts"]]).sort_by("id")
    expected = PoolingEngine.from_pretrained(ctx.registry.resolve(f"{REPO}@{commit}"), dtype=manifest["engine"]["dtype"])
    vectors = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
    np.testing.assert_allclose(vectors, expected.embed(["rivers and lakes", "mountains"]), atol=1e-5)


def test_a_job_pinned_by_tag_computes_with_that_snapshot_after_main_moved(served, tmp_path):
    ctx, client, first = served
    home = Path(os.environ["HF_HOME"])
    (hf_hub_repo(home, REPO) / "refs" / "v1").write_text(first)  # a tag on the first commit
    publish(home, REPO, tiny_st_bert(tmp_path / "model-v2", seed=8))  # then main moves to a second one
    pinned = client.post("/v1/jobs", json={"model": f"{REPO}@v1", "input": DOCS}).json()
    latest = client.post("/v1/jobs", json={"model": REPO, "input": DOCS}).json()
    assert client.get(f"/v1/jobs/{pinned['id']}").json()["model"] == f"{REPO}@{first}"
    assert client.get(f"/v1/jobs/{latest['id']}").json()["model"] != f"{REPO}@{first}"
    vectors = {}
    for name, job in (("pinned", pinned), ("latest", latest)):
        manifest = json.loads(ctx.store.get(JobHandle.bind(ctx, job["id"]).layout.manifest))
        table = pa.concat_tables([read_part(ctx.store.get(part["key"])) for part in manifest["parts"]]).sort_by("id")
        vectors[name] = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
    first_engine = PoolingEngine.from_pretrained(ctx.registry.resolve(f"{REPO}@{first}"), dtype=manifest["engine"]["dtype"])
    np.testing.assert_allclose(vectors["pinned"], first_engine.embed(["rivers and lakes", "mountains"]), atol=1e-5)
    assert not np.allclose(vectors["pinned"], vectors["latest"], atol=1e-3)
