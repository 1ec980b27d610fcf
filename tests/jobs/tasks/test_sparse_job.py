"""sparse_embed jobs on SPLADE-tiny (real weights): rows equal the SPLADE formula on transformers,
pruning, chunked and chunk-row long documents, the manifest's schema, incremental carrying."""
import numpy as np
import pyarrow as pa
import pytest
import torch
from support.splade_reference import splade_reference, splade_tiny_dir
from support.task_jobs import run_task_job

from poolq.engine import SparseVector
from poolq.jobs.tasks.sparse_task import prune

TEXTS = [
    "The Federal Reserve raised interest rates again to fight inflation.",
    "Photosynthesis converts sunlight, water and carbon dioxide into glucose and oxygen.",
    "The striker scored twice in the second half, and the team won the championship.",
    "A short one.",
    "Rivers carry sediment from the mountains down to the sea over thousands of years.",
]
DOCUMENTS = [{"id": f"doc-{i}", "text": text} for i, text in enumerate(TEXTS)]


def _dense(indices, values, size):
    vector = torch.zeros(size)
    vector[torch.tensor(indices, dtype=torch.long)] = torch.tensor(values, dtype=torch.float32)
    return vector


@pytest.fixture(scope="module")
def reference():
    return splade_reference(splade_tiny_dir(), TEXTS)  # [5, vocab]


def test_sparse_rows_equal_the_splade_formula(task_ctx, reference):
    # When a sparse job of five documents runs (two shards)
    manifest, table = run_task_job(task_ctx, DOCUMENTS, model="splade-tiny", task="sparse_embed")
    # Then each row is the reference vector, ids ascending, no zeros
    assert table.column("id").to_pylist() == [d["id"] for d in DOCUMENTS]
    for row, expected in zip(table.to_pylist(), reference):
        assert row["sparse_indices"] == sorted(row["sparse_indices"]) and min(row["sparse_values"]) > 0
        torch.testing.assert_close(_dense(row["sparse_indices"], row["sparse_values"], len(expected)), expected,
                                   atol=1e-5, rtol=1e-5)
    # And the manifest names the task and records the schema the parts have
    assert manifest["task"] == "sparse_embed" and manifest["dimensions"] is None
    assert manifest["output"]["sparse_aggregation"] == "max"  # SPLADE-tiny's pooling: the max over positions
    assert [(c["name"], c["type"]) for c in manifest["output"]["schema"]][:3] == [
        ("id", "string"), ("sparse_indices", "list<int32>"), ("sparse_values", "list<float32>")]
    assert table.schema.field("sparse_indices").type == pa.list_(pa.int32())
    assert manifest["columns"] == table.column_names


def test_pruning_keeps_the_top_k_above_the_minimum(task_ctx, reference):
    manifest, table = run_task_job(task_ctx, DOCUMENTS, model="splade-tiny", task="sparse_embed",
                                   output={"sparse_top_k": 8, "sparse_min_weight": 0.5})
    for row, expected in zip(table.to_pylist(), reference):
        kept = expected >= 0.5
        want = min(8, int(kept.sum()))
        top = torch.topk(torch.where(kept, expected, torch.zeros_like(expected)), want)
        assert row["sparse_indices"] == sorted(top.indices.tolist())
        np.testing.assert_allclose(row["sparse_values"], expected[sorted(top.indices.tolist())].numpy(), atol=1e-5)


def test_prune_breaks_weight_ties_by_the_lower_id():
    vector = SparseVector(np.array([3, 7, 9, 12], dtype=np.int32), np.array([1.0, 2.0, 1.0, 0.2], dtype=np.float32))
    indices, weights = prune(vector, top_k=2, min_weight=None)
    assert indices.tolist() == [3, 7] and weights.tolist() == [1.0, 2.0]
    indices, _ = prune(vector, top_k=None, min_weight=1.0)
    assert indices.tolist() == [3, 7, 9]


def test_long_documents_chunked_and_naive_chunks(task_ctx):
    long_text = " ".join(TEXTS * 6)  # ~6 windows of 32 tokens
    documents = [{"id": "long", "text": long_text}]
    chunked = {"mode": "chunked", "window_tokens": 32}
    _, table = run_task_job(task_ctx, documents, model="splade-tiny", task="sparse_embed", long_documents=chunked)
    (row,) = table.to_pylist()
    # The chunked vector's weight of each term is its max over the windows' (each at most the document's)
    assert row["num_tokens"] > 32 and not row["truncated"] and len(row["sparse_indices"]) > 20
    naive = {"mode": "naive_chunks", "chunk_tokens": 24}
    _, chunks = run_task_job(task_ctx, documents, model="splade-tiny", task="sparse_embed", long_documents=naive)
    assert chunks.num_rows > 4 and chunks.column("chunk_index").to_pylist() == list(range(chunks.num_rows))
    union = {i for indices in chunks.column("sparse_indices").to_pylist() for i in indices}
    assert set(row["sparse_indices"]) <= union | set(row["sparse_indices"])  # same vocabulary space
    assert all(values for values in chunks.column("sparse_values").to_pylist())


def test_an_unchanged_rerun_carries_every_sparse_row(task_ctx):
    first, first_table = run_task_job(task_ctx, DOCUMENTS, model="splade-tiny", task="sparse_embed")
    again, again_table = run_task_job(task_ctx, DOCUMENTS, model="splade-tiny", task="sparse_embed",
                                      incremental_from=first["job_id"])
    assert again["counts"]["carried"] == len(DOCUMENTS) and again["usage"]["tokens"] == 0
    assert again_table.select(["id", "sparse_indices", "sparse_values"]).equals(
        first_table.select(["id", "sparse_indices", "sparse_values"]))
