"""Reuse keys: every output-changing option of the spec is in them (derived from the typed spec,
so a new option is too), nothing else is, and the engine's identity is."""
import pytest
from pydantic import Field

from poolq.jobs.reuse.reuse_key import REUSE_NEUTRAL, reuse_key, reuse_options, reuse_scope
from poolq.jobs.spec.job_spec import JobSpec

ENGINE = "sha256:abc/float32"
BASE = {"input": {"documents": [{"id": "a", "text": "x"}]}}


def _scope(engine=ENGINE, **options) -> str:
    return reuse_scope(JobSpec.model_validate({**BASE, **options}), engine)


@pytest.mark.parametrize("options", [
    {"model": "bge-small-en-v1.5"},
    {"task": "sparse_embed"},
    {"task": ["embed", "sparse_embed"]},
    {"long_documents": {"mode": "truncate"}},
    {"long_documents": {"mode": "late_chunks", "chunk_tokens": 64}},
    {"long_documents": {"mode": "late_chunks", "chunk_tokens": 65}},
    {"long_documents": {"mode": "naive_chunks", "overlap_tokens": 8}},
    {"long_documents": {"mode": "truncate", "side": "start"}},
    {"output": {"dimensions": 64}},
    {"output": {"dtype": "int8"}},
    {"output": {"sparse_top_k": 10}},
    {"output": {"activation": False}},
    {"score_mode": "cosine"},
])
def test_an_option_that_changes_the_output_changes_the_scope(options):
    assert _scope(**options) != _scope()


@pytest.mark.parametrize("options", [
    {"input": {"uri": "s3://bucket/elsewhere.jsonl"}},
    {"incremental_from": "0" * 32},
    {"reuse": "tenant"},
    {"output": {"include_fields": ["title"]}},
    {"webhook": {"url": "https://hooks.example.com/jobs"}},
    {"sink": "search", "webhook": {"url": "https://hooks.example.com/jobs"}},
])
def test_what_does_not_change_the_output_keeps_the_scope(options):
    assert _scope(**options) == _scope()


@pytest.mark.parametrize(("options", "scope"), [
    ({}, "a3292637f5258ea5e20fe10e0b41e306e02e03202428c8686fafa1470a96a331"),
    ({"model": "bge-small-en-v1.5", "task": ["embed", "sparse_embed"], "output": {"dimensions": 64, "include_fields": ["t"]},
      "long_documents": {"mode": "late_chunks", "chunk_tokens": 64}, "reuse": "tenant", "sink": "search",
      "incremental_from": "0" * 32, "compute_dtype": "float16", "allow_mixed_engines": True},
     "047df908948ad524bc78af3a88c46c0d187be2bc4da1b703e1e41f04a3230809"),
    ({"prompt_name": "query"}, "9773ce050b6c743a80b88d3892387dafb4e47230a07db416fa7002d100abfa3e"),
    ({"prompt": "query: ", "output": {"dtype": "int8", "int8_range": [-2, 2]}, "score_mode": "cosine"},
     "8d2b89197d1523178aee4faff97e8a969d72eb29248efe21e9a1391c8bbaa911"),
])
def test_the_scope_of_a_spec_without_a_webhook_is_what_it_was(options, scope):
    """Digests made by the code before webhooks were declared neutral: earlier jobs' keys still match."""
    assert _scope(**options) == scope
    assert _scope(**options, webhook={"url": "https://hooks.example.com/"}) == scope


def test_the_engine_identity_is_in_the_scope():
    assert _scope(engine="sha256:abc/float16") != _scope() != _scope(engine="sha256:def/float32")


def test_another_device_kind_is_another_scope_and_a_cpu_scope_is_what_it_was():
    """CUDA kernels give other last bits: a GPU's outputs never stand for a CPU job's (the stored CPU
    outputs keep their keys: the pinned digests above are CPU scopes)."""
    spec, engine = JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "x"}]}}), "sha256:abc/float32"
    assert reuse_scope(spec, engine, device="cpu") == reuse_scope(spec, engine)
    assert reuse_scope(spec, engine, device="cuda") != reuse_scope(spec, engine)


def test_an_option_added_to_the_spec_later_is_covered_without_listing_it():
    class FutureSpec(JobSpec):
        pooling_temperature: float = Field(1.0)

    base = FutureSpec.model_validate(BASE)
    changed = FutureSpec.model_validate({**BASE, "pooling_temperature": 0.5})
    assert "pooling_temperature" in reuse_options(changed)
    assert reuse_scope(changed, ENGINE) != reuse_scope(base, ENGINE)


def test_the_neutral_names_are_fields_of_the_spec():
    """A renamed field must not silently fall out of the neutral list (and into keys)."""
    for name in REUSE_NEUTRAL:
        model = JobSpec
        *parents, leaf = name.split(".")
        for parent in parents:
            model = model.model_fields[parent].annotation
        assert leaf in model.model_fields, name


def test_keys_differ_by_scope_and_content():
    assert reuse_key("s1", "h1") != reuse_key("s2", "h1") != reuse_key("s1", "h2")
    assert len(reuse_key("s1", "h1")) == 64 and reuse_key("s1", "h1") == reuse_key("s1", "h1")
