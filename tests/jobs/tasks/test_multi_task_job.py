"""A job of several tasks from one forward pass: BGE-M3's layout (random weights) gives dense,
sparse and ColBERT column groups in one row per document, against a reference written on
transformers + torch; the spec's rules for task lists."""
import numpy as np
import pytest
import torch
from support.task_jobs import run_task_job

from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.submit import JobRejected, validate_spec

TEXTS = ["George Orwell wrote Animal Farm.", "Foxes eat rodents, rabbits and berries, and foxes eat eggs."]
DOCUMENTS = [{"id": f"doc-{i}", "text": text} for i, text in enumerate(TEXTS)]
M3_TASKS = ["embed", "sparse_embed", "token_embed"]


@torch.no_grad()
def _reference(path, text):
    from transformers import AutoModel, AutoTokenizer

    tokenizer, encoder = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    sparse_linear, colbert_linear = torch.nn.Linear(32, 1), torch.nn.Linear(32, 24)
    sparse_linear.load_state_dict(torch.load(path / "sparse_linear.pt", weights_only=True))
    colbert_linear.load_state_dict(torch.load(path / "colbert_linear.pt", weights_only=True))
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    hidden = encoder(input_ids=ids).last_hidden_state[0]
    weights = torch.relu(sparse_linear(hidden)).squeeze(-1).tolist()
    unused = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id, tokenizer.unk_token_id}
    sparse: dict[int, float] = {}
    for token_id, weight in zip(ids[0].tolist(), weights):
        if token_id not in unused and weight > 0:
            sparse[token_id] = max(sparse.get(token_id, 0.0), weight)
    return (torch.nn.functional.normalize(hidden[0], dim=-1).numpy(), sparse,
            torch.nn.functional.normalize(colbert_linear(hidden[1:]), dim=-1).numpy(), ids[0].tolist())


def test_dense_sparse_and_colbert_from_one_pass_in_one_row(task_ctx, random_models):
    # Given BGE-M3's layout, When a job asks for its three outputs (listed in any order)
    manifest, table = run_task_job(task_ctx, DOCUMENTS, model="m3", task=["token_embed", "embed", "sparse_embed"],
                                   long_documents={"mode": "truncate"})
    # Then one row per document holds every column group, in the one order
    assert manifest["task"] == "embed+sparse_embed+token_embed"
    assert manifest["columns"] == ["id", "embedding", "sparse_indices", "sparse_values", "token_embeddings", "token_ids",
                                   "char_offsets", "num_tokens", "truncated", "content_hash"]
    assert manifest["options"]["task"] == M3_TASKS and manifest["dimensions"] == 32
    for row, text in zip(table.to_pylist(), TEXTS):
        dense, sparse, colbert, ids = _reference(random_models["m3"], text)
        np.testing.assert_allclose(row["embedding"], dense, atol=1e-5)
        assert row["sparse_indices"] == sorted(sparse)
        np.testing.assert_allclose(row["sparse_values"], [sparse[i] for i in sorted(sparse)], atol=1e-5)
        np.testing.assert_allclose(np.array(row["token_embeddings"]), colbert, atol=1e-5)
        assert row["token_ids"] == ids[1:] and row["num_tokens"] == len(ids)
    # And the usage counts one forward pass per document
    assert manifest["usage"]["tokens"] == sum(row["num_tokens"] for row in table.to_pylist())


def test_one_task_of_the_m3_model_alone(task_ctx, random_models):
    _, table = run_task_job(task_ctx, DOCUMENTS, model="m3", task="sparse_embed", long_documents={"mode": "truncate"})
    for row, text in zip(table.to_pylist(), TEXTS):
        assert row["sparse_indices"] == sorted(_reference(random_models["m3"], text)[1])


@pytest.mark.parametrize("task, message", [
    (["embed"], "two or more different tasks"),
    (["embed", "embed"], "two or more different tasks"),
    (["embed", "classify"], "tasks combined in one job are among embed, sparse_embed, token_embed"),
])
def test_task_lists_must_name_several_combinable_tasks(task, message):
    with pytest.raises(ValueError, match=message):
        JobSpec.model_validate({"task": task, "input": {"documents": DOCUMENTS}})


@pytest.mark.parametrize("fields, field, message", [
    ({"model": "all-MiniLM-L6-v2"}, "task", "serves embed, token_embed, not 'sparse_embed'"),
    ({"model": "m3", "long_documents": {"mode": "chunked"}}, "long_documents.mode", "several tasks at once"),
    ({"model": "m3", "output": {"activation": False}}, "output.activation", r"does not apply to task 'embed\+sparse_embed"),
])
def test_a_combination_the_model_or_mode_cannot_serve_is_rejected(task_ctx, fields, field, message):
    spec = JobSpec.model_validate({"task": M3_TASKS, "input": {"documents": DOCUMENTS}, **fields})
    with pytest.raises(JobRejected, match=message) as caught:
        validate_spec(task_ctx, spec)
    assert caught.value.field == field
