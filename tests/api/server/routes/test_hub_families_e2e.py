"""Families users pick today, named by Hub id exactly as users name them (offline Hub cache under a
temporary HF_HOME, the operator's allow-list), through every way in: a job over HTTP, ``/v1/embeddings``
(the official openai client with ``extra_body``) and an OpenAI batch; each equal to sentence-transformers'
``encode`` with the same prompt, on centred vectors (random weights make raw cosines all near 1)."""
import io
import json

import httpx
import numpy as np
import openai
import pyarrow as pa
import pytest
from support.api_client import InProcessTransport, authed_client
from support.hub_cache import offline_hub
from support.hub_models import FAMILIES, publish_family, snapshot_dir

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_status import LOCAL_TENANT
from poolq.products.batches.batch_advance import advance_batch
from poolq.products.batches.batch_files import create_file, open_file_content
from poolq.products.batches.batches import create_batch, get_batch
from poolq.storage import read_part
from poolq.worker.lane.lane_server import LaneServer
from poolq.worker.local_runner import local_context

NAMES = ("bert-e5", "modernbert-nomic", "qwen3-embed", "gemma3-embed")
QUERIES = ["how do rivers form", "tallest mountain in the alps", "what is a fjord", "capital of norway",
           "rain tomorrow in lyon", "why is the sea salty"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    home = offline_hub(monkeypatch, tmp_path_factory.mktemp("hf"))
    for name in NAMES:
        publish_family(home, name)
    ctx = local_context(tmp_path_factory.mktemp("store"), Settings(models_allow="test-org/*", dtype="float32"))
    lane = InMemoryEmbeddingLane()
    with LaneServer(lane, lambda: ctx.engines, poll_s=0.05):
        yield ctx, authed_client(ctx, lane=lane), home
    monkeypatch.undo()


def _expected(home, name):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(snapshot_dir(home, FAMILIES[name].repo_id)), device="cpu")
    return model.encode(QUERIES, prompt_name="query")


def _centred_cosines(a, b):
    a, b = a - a.mean(0), b - b.mean(0)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("name", NAMES)
def test_a_job_over_http_equals_sentence_transformers(served, name):
    ctx, client, home = served
    documents = [{"id": f"q{i}", "text": text} for i, text in enumerate(QUERIES)]
    accepted = client.post("/v1/jobs", json={"model": FAMILIES[name].repo_id, "input": {"documents": documents},
                                             "prompt_name": "query"})
    assert accepted.status_code == 202, accepted.text
    status = client.get(f"/v1/jobs/{accepted.json()['id']}").json()
    assert status["status"] == "succeeded", status
    manifest = json.loads(ctx.store.get(JobHandle.bind(ctx, status["id"]).layout.manifest))
    table = pa.concat_tables([read_part(ctx.store.get(part["key"])) for part in manifest["parts"]])
    rows = dict(zip(table.column("id").to_pylist(), table.column("embedding").to_numpy(zero_copy_only=False)))
    vectors = np.stack([rows[f"q{i}"] for i in range(len(QUERIES))])
    assert _centred_cosines(vectors, _expected(home, name)).min() >= 0.9999


@pytest.mark.parametrize("name", NAMES)
def test_embeddings_through_the_openai_client_equal_sentence_transformers(served, name):
    _, client, home = served
    http_client = httpx.Client(transport=InProcessTransport(client), base_url="http://testserver")
    api = openai.OpenAI(api_key=client.api_key, base_url="http://testserver/v1", http_client=http_client)
    answer = api.embeddings.create(model=FAMILIES[name].repo_id, input=QUERIES, extra_body={"prompt_name": "query"})
    vectors = np.array([item.embedding for item in answer.data], dtype=np.float32)
    assert _centred_cosines(vectors, _expected(home, name)).min() >= 0.9999


def test_a_batch_equals_sentence_transformers(served):
    ctx, _, home = served
    name = "qwen3-embed"
    lines = [{"custom_id": f"q{i}", "method": "POST", "url": "/v1/embeddings",
              "body": {"model": FAMILIES[name].repo_id, "input": text, "poolq": {"prompt_name": "query"}}}
             for i, text in enumerate(QUERIES)]
    content = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    uploaded = create_file(ctx, LOCAL_TENANT, "in.jsonl", "batch", io.BytesIO(content), max_bytes=1 << 20)
    batch = create_batch(ctx, LOCAL_TENANT, uploaded.id, "/v1/embeddings", "24h", {})
    advance_batch(ctx, LOCAL_TENANT, batch.id)
    batch = get_batch(ctx, LOCAL_TENANT, batch.id, nudge=False)
    assert batch.status == "completed" and batch.request_counts.completed == len(QUERIES), batch
    with open_file_content(ctx, LOCAL_TENANT, batch.output_file_id) as stream:
        answers = {line["custom_id"]: line for line in map(json.loads, stream.read().splitlines())}
    vectors = np.array([answers[f"q{i}"]["response"]["body"]["data"][0]["embedding"] for i in range(len(QUERIES))])
    assert _centred_cosines(vectors, _expected(home, name)).min() >= 0.9999
