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


@torch.no_grad()
def test_long_documents_chunked_and_naive_chunks(task_ctx):
    # Given a document of ~6 windows of 32 tokens
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(splade_tiny_dir())
    hf = AutoModelForMaskedLM.from_pretrained(splade_tiny_dir()).eval()
    long_text = " ".join(TEXTS * 6)
    documents = [{"id": "long", "text": long_text}]
    # When it runs chunked, Then its vector is the SPLADE max over its windows (each [CLS] .. [SEP])
    _, table = run_task_job(task_ctx, documents, model="splade-tiny", task="sparse_embed",
                            long_documents={"mode": "chunked", "window_tokens": 32})
    (row,) = table.to_pylist()
    content = tokenizer(long_text, add_special_tokens=False)["input_ids"]
    windows = [[tokenizer.cls_token_id, *content[i:i + 30], tokenizer.sep_token_id] for i in range(0, len(content), 30)]
    expected = torch.stack([torch.log1p(torch.relu(hf(input_ids=torch.tensor([ids])).logits[0])).amax(0)
                            for ids in windows]).amax(0)
    assert len(windows) > 5 and row["num_tokens"] == len(content) + 2 and not row["truncated"]
    torch.testing.assert_close(_dense(row["sparse_indices"], row["sparse_values"], len(expected)), expected,
                               atol=1e-5, rtol=1e-5)
    # When it runs in naive chunks, Then each chunk row is the SPLADE vector of that chunk's text alone
    _, chunks = run_task_job(task_ctx, documents, model="splade-tiny", task="sparse_embed",
                             long_documents={"mode": "naive_chunks", "chunk_tokens": 24})
    rows = chunks.to_pylist()
    assert len(rows) > 4 and [r["chunk_index"] for r in rows] == list(range(len(rows)))
    pieces = splade_reference(splade_tiny_dir(), [long_text[r["char_start"]:r["char_end"]] for r in rows])
    for chunk_row, piece in zip(rows, pieces):
        torch.testing.assert_close(_dense(chunk_row["sparse_indices"], chunk_row["sparse_values"], len(piece)), piece,
                                   atol=1e-5, rtol=1e-5)


def test_an_unchanged_rerun_carries_every_sparse_row(task_ctx):
    first, first_table = run_task_job(task_ctx, DOCUMENTS, model="splade-tiny", task="sparse_embed")
    again, again_table = run_task_job(task_ctx, DOCUMENTS, model="splade-tiny", task="sparse_embed",
                                      incremental_from=first["job_id"])
    assert again["counts"]["carried"] == len(DOCUMENTS) and again["usage"]["tokens"] == 0
    assert again_table.select(["id", "sparse_indices", "sparse_values"]).equals(
        first_table.select(["id", "sparse_indices", "sparse_values"]))
