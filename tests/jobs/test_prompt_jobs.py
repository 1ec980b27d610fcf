"""A model's prompts through the job path, in process, offline, named by Hub id: a job's ``prompt_name``
computes what the engine computes for the prompted texts (and not what it computes without), its usage
counts the prompt's tokens and the estimate counts them alike; ``/v1/embeddings`` takes ``prompt_name``
as an extra body field (the openai client's ``extra_body``); an unknown prompt name is a 422 naming it."""
import json

import httpx
import numpy as np
import openai
import pyarrow as pa
import pytest
from support.api_client import InProcessTransport, authed_client
from support.hub_cache import offline_hub, publish, tiny_st_bert

from poolq.engine import PoolingEngine
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.jobs.settings import Settings
from poolq.storage import read_part
from poolq.worker.lane.lane_server import LaneServer
from poolq.worker.local_runner import local_context

REPO = "test-org/prompted"
PROMPTS = {"query": "query: ", "passage": "passage: "}
TEXTS = ["how do rivers form", "the tallest mountains on earth", "a third, longer text about lakes and seas"]
DOCS = {"documents": [{"id": f"d{i}", "text": text} for i, text in enumerate(TEXTS)]}


@pytest.fixture
def served(tmp_path, monkeypatch):
    home = offline_hub(monkeypatch, tmp_path / "hf")
    model_dir = tiny_st_bert(tmp_path / "model", seed=11)
    (model_dir / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": PROMPTS, "default_prompt_name": None, "similarity_fn_name": "cosine"}))
    commit = publish(home, REPO, model_dir)
    ctx = local_context(tmp_path / "store", Settings(models_allow="test-org/*", dtype="float32"))
    lane = InMemoryEmbeddingLane()
    with LaneServer(lane, lambda: ctx.engines, poll_s=0.05):
        yield ctx, authed_client(ctx, lane=lane), PoolingEngine.from_pretrained(model_dir, dtype="float32"), commit


def _job(client, ctx, **fields):
    accepted = client.post("/v1/jobs", json={"model": REPO, "input": DOCS, **fields})
    assert accepted.status_code == 202, accepted.text
    status = client.get(f"/v1/jobs/{accepted.json()['id']}").json()
    assert status["status"] == "succeeded", status
    manifest = json.loads(ctx.store.get(JobHandle.bind(ctx, status["id"]).layout.manifest))
    table = pa.concat_tables([read_part(ctx.store.get(part["key"])) for part in manifest["parts"]]).sort_by("id")
    return status, np.stack(table.column("embedding").to_numpy(zero_copy_only=False))


def test_a_jobs_prompt_name_is_put_before_each_text(served):
    ctx, client, engine, _ = served
    plain_status, plain = _job(client, ctx)
    status, prompted = _job(client, ctx, prompt_name="query")
    np.testing.assert_allclose(prompted, engine.embed([PROMPTS["query"] + text for text in TEXTS]), atol=1e-5)
    assert not np.allclose(prompted, plain, atol=1e-3)
    prompt_tokens = len(engine.tokenizer.count_and_tokenize([PROMPTS["query"]])[0])
    assert prompt_tokens >= 2
    assert status["usage"]["tokens"] == plain_status["usage"]["tokens"] + len(TEXTS) * prompt_tokens
    _, literal = _job(client, ctx, prompt="query: ")
    np.testing.assert_allclose(literal, prompted, atol=1e-6)


def test_the_estimate_counts_the_prompts_tokens_as_the_job_does(served):
    ctx, client, _, _ = served
    status, _ = _job(client, ctx, prompt_name="passage")
    estimate = client.post("/v1/jobs/estimate", json={"model": REPO, "input": DOCS, "prompt_name": "passage"}).json()
    assert estimate["tokens"] == status["usage"]["tokens"]


def test_an_unknown_prompt_name_is_a_422_naming_it(served):
    _, client, _, _ = served
    response = client.post("/v1/jobs/validate", json={"model": REPO, "input": DOCS, "prompt_name": "summary"})
    assert response.status_code == 422
    assert "prompt_name" in response.text and "'summary'" in response.text and "'query'" in response.text
    both = client.post("/v1/jobs/validate", json={"model": REPO, "input": DOCS, "prompt_name": "query", "prompt": "x"})
    assert both.status_code == 422 and "not both" in both.text
    assert both.json()["detail"][0]["loc"] == ["body", "prompt"]  # the field, not the body as a whole


def test_embeddings_take_prompt_name_through_the_openai_clients_extra_body(served):
    ctx, client, engine, _ = served
    http_client = httpx.Client(transport=InProcessTransport(client), base_url="http://testserver")
    api = openai.OpenAI(api_key=client.api_key, base_url="http://testserver/v1", http_client=http_client)
    answer = api.embeddings.create(model=REPO, input=TEXTS, extra_body={"prompt_name": "query"})
    vectors = np.array([item.embedding for item in answer.data], dtype=np.float32)
    np.testing.assert_allclose(vectors, engine.embed([PROMPTS["query"] + text for text in TEXTS]), atol=1e-5)


def test_in_chunked_mode_every_window_carries_the_prompt_and_the_estimate_counts_it(served):
    ctx, client, _, _ = served
    long_docs = {"documents": [{"id": "long", "text": " ".join(TEXTS * 6)}, {"id": "short", "text": TEXTS[0]}]}
    body = {"model": REPO, "input": long_docs, "prompt_name": "query",
            "long_documents": {"mode": "chunked", "window_tokens": 16}}
    accepted = client.post("/v1/jobs", json=body)
    assert accepted.status_code == 202, accepted.text
    status = client.get(f"/v1/jobs/{accepted.json()['id']}").json()
    assert status["status"] == "succeeded", status
    plain = client.post("/v1/jobs", json={**body, "prompt_name": None}).json()
    plain_status = client.get(f"/v1/jobs/{plain['id']}").json()
    assert status["usage"]["tokens"] > plain_status["usage"]["tokens"] + 2 * 2  # more windows, each with the prompt
    estimate = client.post("/v1/jobs/estimate", json=body).json()
    assert estimate["tokens"] == status["usage"]["tokens"]
