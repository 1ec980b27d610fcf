"""Submit-time checks against the model, from its spec alone (no weights loaded)."""
def test_a_job_for_a_task_its_model_lacks_is_rejected_naming_the_models_tasks(local_ctx):
    import pytest

    from poolq.jobs.spec.job_spec import JobSpec
    from poolq.jobs.steps.submit import JobRejected, submit_job

    spec = JobSpec.model_validate({"model": "splade-tiny", "input": {"documents": [{"id": "a", "text": "x"}]}})
    with pytest.raises(JobRejected, match="serves sparse_embed, not 'embed'"):
        submit_job(local_ctx, spec)


def test_each_packaged_model_kind_declares_the_tasks_its_dispatcher_serves(minilm_engine):
    from poolq.engine import PoolingEngine

    splade = PoolingEngine.from_pretrained("splade-tiny", dtype="float32")
    for engine in (minilm_engine, splade):
        assert engine.supported_tasks == engine.spec.kind.tasks


def test_a_window_the_models_special_tokens_fill_alone_is_rejected_naming_it(local_ctx):
    import pytest

    from poolq.jobs.spec.job_spec import JobSpec
    from poolq.jobs.steps.submit import JobRejected, submit_job

    # MiniLM's tokenizer puts [CLS] and [SEP] around every text: a window of 2 leaves no token for it
    def spec(window: int) -> JobSpec:
        return JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "x"}]},
                                       "long_documents": {"mode": "truncate", "window_tokens": window}})

    with pytest.raises(JobRejected, match="leaves no room next to the model's 2 special tokens") as refused:
        submit_job(local_ctx, spec(2))
    assert refused.value.field == "long_documents.window_tokens"
    assert submit_job(local_ctx, spec(3)).id  # one token of text fits
