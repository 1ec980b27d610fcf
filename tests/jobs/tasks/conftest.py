"""Jobs of every task, run in process on real or random-weight models saved to disk."""
import json

import pyarrow as pa
import pytest

from poolq.jobs.job import JobSpec, JobState
from poolq.jobs.local_runner import local_context, run_job_locally
from poolq.jobs.settings import Settings
from poolq.storage import read_part


@pytest.fixture
def task_ctx(tmp_path, random_models):
    """An in-process context (shards of at most 4 documents) knowing the random-weight models."""
    settings = Settings(shard_max_documents=4, shard_max_chars=20_000, models={n: str(p) for n, p in random_models.items()})
    return local_context(tmp_path / "out", settings)


@pytest.fixture(scope="session")
def random_models(tmp_path_factory):
    """Random-weight classifiers saved in the real checkpoint layout, with MiniLM's tokenizer."""
    from support.random_models import save_random_model, tiny_bert_config
    from transformers import BertForSequenceClassification

    made = {}
    path = tmp_path_factory.mktemp("reranker")  # a cross-encoder: one label, sigmoid
    save_random_model(path, BertForSequenceClassification, tiny_bert_config(num_labels=1), seed=3)
    made["reranker"] = path
    labels = {"topic-multilabel": ["sports", "politics", "science", "arts"], "sentiment": ["negative", "positive"]}
    problem = {"topic-multilabel": "multi_label_classification", "sentiment": "single_label_classification"}
    for name, names in labels.items():
        path = tmp_path_factory.mktemp(name)
        config = tiny_bert_config(num_labels=len(names), problem_type=problem[name],
                                  id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
        save_random_model(path, BertForSequenceClassification, config, seed=len(name))
        made[name] = path
    return made


def run_task_job(ctx, documents, **fields):
    """Run a job of ``documents`` with ``fields`` (task, model, output, long_documents); its
    manifest and all its rows, sorted by id (and chunk)."""
    spec = JobSpec.model_validate({"input": {"documents": documents}, **fields})
    status = run_job_locally(spec, ctx)
    assert status.status is JobState.SUCCEEDED, (status.error, status.error_samples)
    manifest = json.loads(ctx.store.get(ctx.layout(status.id).manifest))
    table = pa.concat_tables([read_part(ctx.store.get(part["key"])) for part in manifest["parts"]])
    keys = [("id", "ascending")] + ([("chunk_index", "ascending")] if "chunk_index" in table.column_names else [])
    return manifest, table.sort_by(keys)
