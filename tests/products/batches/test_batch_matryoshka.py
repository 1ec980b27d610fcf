"""A batch on a model saved with ``truncate_dim``: each line answers exactly as ``/v1/embeddings`` does with
the same body: naming no ``dimensions``, the model's size (cut as sentence-transformers' ``encode`` cuts);
naming one, that size, below or above ``truncate_dim`` up to the full size, L2-normalized again.

The model: ``tiny_st_bert`` (32 dimensions, Normalize) saved with ``truncate_dim=12`` (support/matryoshka_model.py).
"""
import io
import json

import numpy as np
import pytest
from support.api_client import authed_client
from support.hub_cache import offline_hub, publish
from support.matryoshka_model import matryoshka_st_bert

from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_status import LOCAL_TENANT
from poolq.products.batches.batch_advance import advance_batch
from poolq.products.batches.batch_files import create_file, open_file_content
from poolq.products.batches.batches import create_batch, get_batch
from poolq.worker.lane.lane_server import LaneServer
from poolq.worker.local_runner import local_context

REPO = "test-org/tiny-matryoshka"
TEXTS = ["rivers and lakes", "mountains", "how tall is the eiffel tower"]
SIZES = (None, 8, 12, 20, 32)  # none, below truncate_dim, at it, above it, the full size


@pytest.fixture
def served(tmp_path, monkeypatch):
    saved = matryoshka_st_bert(tmp_path / "model", seed=5, truncate_dim=12)
    publish(offline_hub(monkeypatch, tmp_path / "hf"), REPO, saved)
    ctx = local_context(tmp_path / "store", Settings(models_allow="test-org/*"))
    lane = InMemoryEmbeddingLane()
    with LaneServer(lane, lambda: ctx.engines, poll_s=0.05):
        yield ctx, authed_client(ctx, lane=lane)


def _body(dimensions: int | None) -> dict:
    return {"model": REPO, "input": TEXTS, **({} if dimensions is None else {"dimensions": dimensions})}


def _batch_output(ctx) -> dict[str, np.ndarray]:
    lines = [{"custom_id": f"dims-{size}", "method": "POST", "url": "/v1/embeddings", "body": _body(size)}
             for size in SIZES]
    content = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    uploaded = create_file(ctx, LOCAL_TENANT, "in.jsonl", "batch", io.BytesIO(content), max_bytes=1 << 20)
    batch = create_batch(ctx, LOCAL_TENANT, uploaded.id, "/v1/embeddings", "24h", None)
    advance_batch(ctx, LOCAL_TENANT, batch.id)
    batch = get_batch(ctx, LOCAL_TENANT, batch.id, nudge=False)
    assert batch.status == "completed" and batch.request_counts.failed == 0, batch
    with open_file_content(ctx, LOCAL_TENANT, batch.output_file_id) as stream:
        answered = [json.loads(line) for line in stream.read().splitlines()]
    return {line["custom_id"]: np.array([row["embedding"] for row in line["response"]["body"]["data"]])
            for line in answered}


def test_each_batch_line_answers_as_v1_embeddings_with_the_same_dimensions(served):
    ctx, client = served
    batch = _batch_output(ctx)
    for size in SIZES:
        direct = client.post("/v1/embeddings", json=_body(size))
        assert direct.status_code == 200, direct.text
        expected = np.array([row["embedding"] for row in direct.json()["data"]])
        assert expected.shape == (3, size or 12)
        np.testing.assert_allclose(batch[f"dims-{size}"], expected, atol=1e-5, err_msg=f"dimensions={size}")
