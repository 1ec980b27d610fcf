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
from support.random_models import save_random_model, tiny_bert_config
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
def stack(tmp_path_factory, classifier_dir):
    env = {"POOLQ_SHARD_MAX_DOCUMENTS": "4", "POOLQ_MODELS": json.dumps({"topics": str(classifier_dir)})}
    with dev_stack(tmp_path_factory.mktemp("stack"), env=env) as info:
        yield info


def _run(stack, spec: dict) -> tuple[dict, list[dict]]:
    """Submit ``spec`` over HTTP, wait, and read every row of its parts back from the bucket."""
    s3 = make_s3_client(S3Config(stack["s3_endpoint"], stack["access_key_id"], stack["secret_access_key"]))
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        job = client.submit(spec)
        final = client.wait(job["id"], poll_interval=0.5, timeout=600)
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
