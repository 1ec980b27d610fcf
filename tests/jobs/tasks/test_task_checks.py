"""Submit-time checks of a job's task against its model, from the model's files alone."""
from typing import get_args

import pytest

from poolq.jobs.spec.job_spec import JobSpec, JobTaskName
from poolq.jobs.steps.submit import JobRejected, validate_spec
from poolq.jobs.tasks import JOB_TASKS


def _spec(**fields):
    return JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "x"}]}, **fields})


def test_every_task_a_spec_may_name_has_an_output_format():
    assert set(JOB_TASKS) == set(get_args(JobTaskName))


@pytest.mark.parametrize("fields, field, message", [
    ({"task": "sparse_embed"}, "task", "serves embed, token_embed, not 'sparse_embed'"),
    ({"task": "classify", "model": "splade-tiny"}, "task", "serves sparse_embed, not 'classify'"),
    ({"task": "sparse_embed", "model": "splade-tiny", "long_documents": {"mode": "late_chunks"}}, "long_documents.mode",
     "does not apply to task 'sparse_embed'"),
    ({"task": "sparse_embed", "model": "splade-tiny", "output": {"dimensions": 4}}, "output.dimensions",
     "output.dimensions does not apply"),
    ({"task": "embed", "output": {"sparse_min_weight": 0.1}}, "output.sparse_min_weight", "does not apply to task 'embed'"),
    ({"task": "classify", "model": "sentiment", "output": {"token_label_scores": True}}, "output.token_label_scores",
     "does not apply to task 'classify'"),
    ({"task": "classify", "model": "sentiment", "output": {"label_threshold": 0.3}}, "output.label_threshold",
     "applies to multi-label models"),
    ({"task": "score", "model": "reranker", "prompt": "query: "}, "prompt", "does not apply to score_mode 'cross_encoder'"),
    ({"task": "embed", "prompt_name": "summary"}, "prompt_name", "'summary' is not one of this model's prompts"),
])
def test_a_task_or_option_the_model_cannot_serve_is_a_rejection_naming_the_field(task_ctx, fields, field, message):
    with pytest.raises(JobRejected, match=message) as caught:
        validate_spec(task_ctx, _spec(**fields))
    assert caught.value.field == field


def test_an_option_left_at_its_default_is_not_a_rejection(task_ctx):
    validate_spec(task_ctx, _spec(task="sparse_embed", model="splade-tiny", output={"dtype": "float32"}))
