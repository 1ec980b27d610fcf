"""classify jobs on random-weight classifiers saved to disk: scores equal transformers' logits
through the activation the config names, labels from id2label, chunked long documents."""
import numpy as np
import pytest
import torch
from support.task_jobs import run_task_job

TEXTS = ["the match ended in a draw", "parliament passed the budget", "a new comet was seen", "jazz at the opera",
         "x"]
DOCUMENTS = [{"id": f"doc-{i}", "text": text} for i, text in enumerate(TEXTS)]


@torch.no_grad()
def _logits(path, texts):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    return model(**tokenizer(texts, padding=True, return_tensors="pt")).logits


def test_multi_label_scores_labels_and_threshold(task_ctx, random_models):
    # Given a multi-label model (sigmoid) with named labels
    logits = _logits(random_models["topic-multilabel"], TEXTS)
    names = np.array(["sports", "politics", "science", "arts"])
    manifest, table = run_task_job(task_ctx, DOCUMENTS, model="topic-multilabel", task="classify",
                                   output={"label_threshold": 0.5})
    scores = np.array(table.column("scores").to_pylist())
    np.testing.assert_allclose(scores, torch.sigmoid(logits).numpy(), atol=1e-5)
    assert table.column("label").to_pylist() == names[scores.argmax(1)].tolist()
    assert table.column("label_index").to_pylist() == scores.argmax(1).tolist()
    assert table.column("labels").to_pylist() == [names[row >= 0.5].tolist() for row in scores]
    assert [c["name"] for c in manifest["output"]["schema"]][:5] == ["id", "scores", "label", "label_index", "labels"]
    assert manifest["output"]["labels"] == names.tolist()  # what each position of ``scores`` means


def test_raw_logits_keep_the_threshold_a_probability(task_ctx, random_models):
    logits = _logits(random_models["topic-multilabel"], TEXTS).numpy()
    _, table = run_task_job(task_ctx, DOCUMENTS, model="topic-multilabel", task="classify",
                            output={"activation": False, "label_threshold": 0.6})
    np.testing.assert_allclose(np.array(table.column("scores").to_pylist()), logits, atol=1e-5)
    names = np.array(["sports", "politics", "science", "arts"])
    assert table.column("labels").to_pylist() == [names[1 / (1 + np.exp(-row)) >= 0.6].tolist() for row in logits]


def test_single_label_softmax_has_no_labels_column(task_ctx, random_models):
    logits = _logits(random_models["sentiment"], TEXTS)
    _, table = run_task_job(task_ctx, DOCUMENTS, model="sentiment", task="classify")
    np.testing.assert_allclose(np.array(table.column("scores").to_pylist()), torch.softmax(logits, -1).numpy(), atol=1e-5)
    assert "labels" not in table.column_names
    assert set(table.column("label").to_pylist()) <= {"negative", "positive"}


@torch.no_grad()
def test_chunked_long_documents_average_logits_over_windows(task_ctx, random_models):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = random_models["sentiment"]
    text = " ".join(TEXTS * 8)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    content = tokenizer(text, add_special_tokens=False)["input_ids"]
    windows = [[tokenizer.cls_token_id, *content[i:i + 30], tokenizer.sep_token_id] for i in range(0, len(content), 30)]
    logits = torch.stack([model(input_ids=torch.tensor([ids])).logits[0] for ids in windows])
    weights = torch.tensor([float(len(ids)) for ids in windows])
    expected = torch.softmax((logits * weights[:, None]).sum(0) / weights.sum(), -1)
    _, table = run_task_job(task_ctx, [{"id": "long", "text": text}], model="sentiment", task="classify",
                            long_documents={"mode": "chunked", "window_tokens": 32})
    np.testing.assert_allclose(table.column("scores").to_pylist()[0], expected.numpy(), atol=1e-5)


@pytest.mark.parametrize("output, field", [({"dimensions": 8}, "output.dimensions"), ({"dtype": "int8"}, "output.dtype"),
                                           ({"sparse_top_k": 3}, "output.sparse_top_k")])
def test_options_of_other_tasks_are_rejected_naming_the_field(task_ctx, output, field):
    from poolq.jobs.spec.job_spec import JobSpec
    from poolq.jobs.steps.submit import JobRejected, validate_spec

    spec = JobSpec.model_validate({"model": "sentiment", "task": "classify", "output": output,
                                   "input": {"documents": DOCUMENTS}})
    with pytest.raises(JobRejected, match=f"{field} does not apply to task 'classify'") as caught:
        validate_spec(task_ctx, spec)
    assert caught.value.field == field
