"""Jobs of every task, run in process on real or random-weight models saved to disk."""
import pytest

from poolq.jobs.settings import Settings
from poolq.worker.local_runner import local_context


@pytest.fixture
def task_ctx(tmp_path, random_models):
    """An in-process context (shards of at most 4 documents) knowing the random-weight models."""
    settings = Settings(shard_max_documents=4, shard_max_chars=20_000, models={n: str(p) for n, p in random_models.items()})
    return local_context(tmp_path / "out", settings)


@pytest.fixture(scope="session")
def random_models(tmp_path_factory):
    """Random-weight classifiers saved in the real checkpoint layout, with MiniLM's tokenizer."""
    from support.random_models import save_random_m3_model, save_random_model, tiny_bert_config
    from transformers import BertForSequenceClassification, BertForTokenClassification

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
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    path = tmp_path_factory.mktemp("tagger")  # a token classifier with B-/I- tags
    config = tiny_bert_config(num_labels=len(tags), id2label=dict(enumerate(tags)), label2id={t: i for i, t in enumerate(tags)})
    save_random_model(path, BertForTokenClassification, config, seed=11)
    made["tagger"] = path
    path = tmp_path_factory.mktemp("m3")  # BGE-M3's layout
    save_random_m3_model(path, seed=5)
    made["m3"] = path
    return made
