"""A compute pool child loads the default model as it starts, in a thread, not in its first shard."""
import logging

from poolq.jobs.settings import Settings
from poolq.worker.local_runner import local_context
from poolq.worker.model_warmup import warm_models


def test_the_default_model_is_loaded_before_any_work_asks_for_it(tmp_path):
    ctx = local_context(tmp_path / "out", Settings())
    assert ctx.engines.loaded == frozenset()
    warm_models(lambda: ctx).join(300)
    assert ctx.engines.loaded == {ctx.settings.serving.default_model}
    engine = ctx.engines.get(ctx.settings.serving.default_model)
    assert engine.embed(["warm"]).shape == (1, 384)


def test_a_model_that_cannot_load_is_logged_and_left_to_the_shard_that_needs_it(tmp_path, caplog):
    ctx = local_context(tmp_path / "out", Settings(default_model="no-such-model"))
    with caplog.at_level(logging.ERROR, logger="poolq.worker.model_warmup"):
        thread = warm_models(lambda: ctx)
        thread.join(60)
    assert not thread.is_alive() and ctx.engines.loaded == frozenset()
    assert "warming model no-such-model failed" in caplog.text
