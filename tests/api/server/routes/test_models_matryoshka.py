"""A Matryoshka model over the API, named by Hub id, offline: ``GET /v1/models`` lists its default size
(``truncate_dim``) and the sizes its card says it was trained for; a job and ``/v1/embeddings`` give its
vectors at that size exactly as sentence-transformers' ``encode`` does, unless the request names
``dimensions`` (up to the full size; more is a 400 naming the field).

The model: ``tiny_st_bert`` (32 dimensions, Normalize) saved by sentence-transformers with
``truncate_dim=12``, its card carrying a ``MatryoshkaLoss`` over 32, 16 and 8 (support/matryoshka_model.py).
"""
import json

import numpy as np
import pyarrow as pa
import pytest
from support.api_client import authed_client
from support.hub_cache import offline_hub, publish
from support.matryoshka_model import matryoshka_st_bert

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.jobs.settings import Settings
from poolq.storage import read_part
from poolq.worker.lane.lane_server import LaneServer
from poolq.worker.local_runner import local_context

REPO = "test-org/tiny-matryoshka"
TEXTS = ["rivers and lakes", "mountains", "how tall is the eiffel tower"]


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A client of a context serving the Hub id (and the packaged models), its lane answered in a thread,
    and sentence-transformers' model of the same files."""
    from sentence_transformers import SentenceTransformer

    saved = matryoshka_st_bert(tmp_path / "model", seed=5, truncate_dim=12, card_dims=(32, 16, 8))
    publish(offline_hub(monkeypatch, tmp_path / "hf"), REPO, saved)
    ctx = local_context(tmp_path / "store", Settings(models_allow="test-org/*"))
    lane = InMemoryEmbeddingLane()
    with LaneServer(lane, lambda: ctx.engines, poll_s=0.05):
        yield ctx, authed_client(ctx, lane=lane), SentenceTransformer(str(saved), device="cpu")


def test_models_list_the_matryoshka_sizes_a_model_declares(served):
    _, client, _ = served
    response = client.get("/v1/models")
    assert response.status_code == 200, response.text
    by_id = {model["id"]: model for model in response.json()["data"]}
    listed = by_id[REPO]
    assert (listed["dimensions"], listed["max_dimensions"], listed["truncate_dim"]) == (12, 32, 12)  # as get_embedding_dimension
    assert listed["matryoshka_dimensions"] == [32, 16, 12, 8]
    packaged = by_id["all-MiniLM-L6-v2"]  # no card beside it declares sizes, nor a truncate_dim
    assert (packaged["truncate_dim"], packaged["matryoshka_dimensions"]) == (None, None)


def test_a_job_writes_the_models_size_as_sentence_transformers_encodes(served):
    ctx, client, st = served
    documents = [{"id": str(index), "text": text} for index, text in enumerate(TEXTS)]
    accepted = client.post("/v1/jobs", json={"model": REPO, "input": {"documents": documents}})
    assert accepted.status_code == 202, accepted.text
    job = client.get(f"/v1/jobs/{accepted.json()['id']}").json()
    assert job["status"] == "succeeded", job
    manifest = json.loads(ctx.store.get(JobHandle.bind(ctx, job["id"]).layout.manifest))
    table = pa.concat_tables([read_part(ctx.store.get(part["key"])) for part in manifest["parts"]]).sort_by("id")
    vectors = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
    assert manifest["dimensions"] == 12 and vectors.shape == (3, 12)
    np.testing.assert_allclose(vectors, st.encode(TEXTS), atol=1e-5)  # cut after Normalize: norms below 1 as encode's


def test_v1_embeddings_gives_the_models_size_unless_the_request_names_one(served):
    _, client, st = served
    default = client.post("/v1/embeddings", json={"model": REPO, "input": TEXTS})
    assert default.status_code == 200, default.text
    vectors = np.array([row["embedding"] for row in default.json()["data"]])
    np.testing.assert_allclose(vectors, st.encode(TEXTS), atol=1e-5)
    larger = client.post("/v1/embeddings", json={"model": REPO, "input": TEXTS, "dimensions": 20})
    vectors = np.array([row["embedding"] for row in larger.json()["data"]])
    assert vectors.shape == (3, 20)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)  # normalized again, as always
    refused = client.post("/v1/embeddings", json={"model": REPO, "input": TEXTS, "dimensions": 33})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "dimensions", refused.text
    assert "exceeds the 32 dimensions" in refused.json()["error"]["message"]
