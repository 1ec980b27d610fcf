"""Reuse across the change that cut a ``truncate_dim`` model's vectors: poolq before it stored that model's
vectors whole, under the same files' fingerprint and options. A job naming no ``dimensions`` on such a
model has its own scope, so those full-size rows are never copied beside cut ones; a job naming
``dimensions``, and every job on a model without ``truncate_dim``, keeps the scope it had (its stored rows
are still the same computation).

The models: ``tiny_st_bert`` (32 dimensions) as it is, and saved by sentence-transformers with
``truncate_dim=12`` (support/matryoshka_model.py), both served by Hub id from an offline cache.
"""
import pytest
from support.hub_cache import offline_hub, publish
from support.matryoshka_model import matryoshka_st_bert

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.reuse.reuse_key import reuse_scope
from poolq.jobs.reuse.reuse_scope import JobReuse, engine_scope
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context

MATRYOSHKA, PLAIN = "test-org/tiny-matryoshka", "test-org/tiny-plain"


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    saved = matryoshka_st_bert(tmp_path / "model", seed=5, truncate_dim=12)
    hf_home = offline_hub(monkeypatch, tmp_path / "hf")
    publish(hf_home, MATRYOSHKA, saved)
    publish(hf_home, PLAIN, tmp_path / "model" / "base")  # the same model without truncate_dim
    return local_context(tmp_path / "store", Settings(models_allow="test-org/*"))


def _spec(model: str, **output) -> JobSpec:
    return JobSpec.model_validate({"model": model, "input": {"documents": [{"id": "a", "text": "x"}]},
                                   "output": output, "reuse": "tenant"})


def _earlier_scope(spec: JobSpec, ctx, dtype: str | None = None) -> str:
    """The scope as poolq computed it before the cut: the engine identity and the options, nothing else."""
    return reuse_scope(spec, ctx.engines.identity(spec.model, dtype))


def test_a_truncate_dim_models_default_size_has_its_own_scope(ctx):
    cut = _spec(MATRYOSHKA)
    assert engine_scope(cut, ctx.engines, None) != _earlier_scope(cut, ctx)
    # the same computation as before keeps its scope: a size named, or no truncate_dim
    for same in (_spec(MATRYOSHKA, dimensions=12), _spec(MATRYOSHKA, dimensions=32), _spec(PLAIN)):
        assert engine_scope(same, ctx.engines, None) == _earlier_scope(same, ctx), same.model_dump(include={"output"})


def test_a_jobs_reuse_uses_that_scope(ctx):
    handle = JobHandle.bind(ctx, submit_job(ctx, _spec(MATRYOSHKA)).id)
    reuse = JobReuse.of(handle)
    assert reuse is not None and handle.spec.model.startswith(f"{MATRYOSHKA}@")  # pinned to its commit
    assert reuse.scope == engine_scope(handle.spec, ctx.engines, handle.compute_dtype)
    assert reuse.scope != _earlier_scope(handle.spec, ctx, handle.compute_dtype)
