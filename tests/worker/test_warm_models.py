"""Each of POOLQ_WARM_MODELS is loaded and run once as a compute pool child starts, so its first
request compiles nothing."""
from collections import Counter

import pytest
from support.random_models import save_random_model, tiny_bert_config

from poolq.engine.runners.packed_runner import PackedRunner
from poolq.jobs.settings import Settings
from poolq.worker.local_runner import local_context
from poolq.worker.model_warmup import models_to_warm, warm_models


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    from transformers import BertModel

    dirs = {}
    for seed, name in enumerate(("tiny-a", "tiny-b")):
        path = tmp_path_factory.mktemp(name)
        save_random_model(path, BertModel, tiny_bert_config(), seed=seed)
        dirs[name] = str(path)
    return dirs


def test_each_warm_model_is_loaded_and_runs_one_forward(tmp_path, two_models, monkeypatch):
    forwards: Counter[int] = Counter()  # runner -> forward calls
    real_forward = PackedRunner.forward

    def counted(self, batch):
        forwards[id(self)] += 1
        return real_forward(self, batch)

    monkeypatch.setattr(PackedRunner, "forward", counted)
    ctx = local_context(tmp_path / "out", Settings(models=two_models, warm_models=" tiny-b, tiny-a ,tiny-b"))
    warm_models(lambda: ctx).join(120)
    assert ctx.engines.loaded == {"tiny-a", "tiny-b"}
    runners = [id(ctx.engines.get(name).runner) for name in ("tiny-a", "tiny-b")]
    assert forwards == {runner: 1 for runner in runners}


def test_the_default_is_the_default_model():
    assert models_to_warm(Settings()) == [Settings().serving.default_model]
    assert models_to_warm(Settings(warm_models="x, y,,x")) == ["x", "y"]
