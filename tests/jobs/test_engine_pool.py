"""A worker's engines are bounded by a memory budget: the least recently used idle one is unloaded
to make room, one in use never is, and the pool counts loads, evictions, load time and bytes."""
import logging

import numpy as np
import pytest
from support.random_models import save_random_model, tiny_bert_config

from poolq.engine import EngineConfig, ModelRegistry, PoolingEngine
from poolq.engine.loading.resident_memory import resident_bytes
from poolq.jobs.engine_pool import EnginePool, EngineStats

TEXTS = ["the committee approved the budget", "a second, longer text about the weather on tuesday"]


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    """Three tiny random BERTs of the same size, each with its own weights."""
    from transformers import BertModel

    dirs = {}
    for seed, name in enumerate(("a", "b", "c")):
        dirs[name] = tmp_path_factory.mktemp(f"pool-{name}")
        save_random_model(dirs[name], BertModel, tiny_bert_config(), seed=seed)
    return dirs


@pytest.fixture(scope="module")
def expected(model_dirs):
    """Each model's vectors and resident bytes, from an engine of its own."""
    engines = {name: PoolingEngine.from_pretrained(str(path), dtype="float32") for name, path in model_dirs.items()}
    return {name: (engine.embed(TEXTS), resident_bytes(engine.loaded)) for name, engine in engines.items()}


def _pool(model_dirs, budget):
    return EnginePool(ModelRegistry(dict(model_dirs)), EngineConfig(dtype="float32"), memory_budget=budget)


def _stats(pool) -> dict[str, EngineStats]:
    return {record.model: record for record in pool.stats()}


def test_a_budget_of_one_model_alternating_two_loads_and_evicts_each_time(model_dirs, expected):
    size = expected["a"][1]
    pool = _pool(model_dirs, budget=size * 3 // 2)
    for name in ("a", "b", "a", "b"):
        np.testing.assert_allclose(pool.get(name).embed(TEXTS), expected[name][0], atol=1e-6)
        assert pool.loaded == {name}
    stats = _stats(pool)
    assert (stats["a"].loads, stats["a"].evictions, stats["a"].loaded) == (2, 2, False)
    assert (stats["b"].loads, stats["b"].evictions, stats["b"].loaded) == (2, 1, True)
    assert stats["a"].resident_bytes == size and stats["a"].load_seconds > 0 and stats["a"].dtype == "float32"


def test_the_least_recently_used_goes_first(model_dirs, expected):
    pool = _pool(model_dirs, budget=expected["a"][1] * 5 // 2)  # two fit, not three
    pool.get("a"), pool.get("b"), pool.get("a")  # b is now the least recently used
    pool.get("c")
    assert pool.loaded == {"a", "c"}
    assert [(r.model, r.evictions) for r in pool.stats()] == [("a", 0), ("b", 1), ("c", 0)]


def test_an_engine_in_use_is_never_unloaded(model_dirs, expected, caplog):
    pool = _pool(model_dirs, budget=expected["a"][1] * 3 // 2)
    engine = pool.get("a")
    with pool.in_use(engine):
        with caplog.at_level(logging.WARNING, logger="poolq.jobs.engine_pool"):
            pool.get("b")
        assert pool.loaded == {"a", "b"} and _stats(pool)["a"].in_use == 1
        assert "loaded past the worker's model memory" in caplog.text
        np.testing.assert_allclose(engine.embed(TEXTS), expected["a"][0], atol=1e-6)
    pool.get("c")  # a is idle again: both idle ones make room for c
    assert pool.loaded == {"c"} and _stats(pool)["a"].in_use == 0


def test_a_model_larger_than_the_budget_still_loads_alone(model_dirs, expected, caplog):
    pool = _pool(model_dirs, budget=1)
    with caplog.at_level(logging.WARNING, logger="poolq.jobs.engine_pool"):
        np.testing.assert_allclose(pool.get("a").embed(TEXTS), expected["a"][0], atol=1e-6)
        pool.get("b")
    assert pool.loaded == {"b"} and "it is larger than the budget on its own" in caplog.text


def test_without_a_budget_every_engine_is_kept(model_dirs):
    pool = _pool(model_dirs, budget=None)
    for name in ("a", "b", "c", "a"):
        pool.get(name)
    assert pool.loaded == {"a", "b", "c"}
    assert [(r.loads, r.evictions) for r in pool.stats()] == [(1, 0)] * 3


def test_resident_bytes_count_every_parameter_and_buffer_once(minilm_engine):
    encoder = minilm_engine.runner.encoder
    tensors = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in [*encoder.parameters(), *encoder.buffers()]}
    assert resident_bytes(minilm_engine.loaded) == sum(tensors.values()) > 80_000_000  # MiniLM: 22.7M float32 parameters
