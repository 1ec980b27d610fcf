"""A compute worker's heartbeat says what its engine pool did with each model (loads, evictions, load
seconds, resident bytes, loaded now), real loads of tiny models included, and names an engine handed
to the pool as loaded too."""
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest
from support.random_models import save_random_model, tiny_bert_config

from poolq.engine import EngineConfig, ModelRegistry
from poolq.jobs.coordination.worker_model_stats import UNKNOWN_DTYPE
from poolq.jobs.engine_pool import EnginePool
from poolq.jobs.settings import Settings
from poolq.worker.compute_presence import ComputePresence
from poolq.worker.local_runner import local_context

WORKER = "host:1234"


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    from transformers import BertModel

    dirs = {}
    for seed, name in enumerate(("a", "b")):
        dirs[name] = tmp_path_factory.mktemp(f"presence-{name}")
        save_random_model(dirs[name], BertModel, tiny_bert_config(), seed=seed)
    return dirs


def test_a_beat_reports_each_engine_of_the_pool(tmp_path, model_dirs):
    # a budget of one byte: each load unloads the idle engine before it (a still loads, alone, with a warning)
    pool = EnginePool(ModelRegistry(dict(model_dirs)), EngineConfig(dtype="float32"),
                      memory_budget=1)
    pool.get("a"), pool.get("b")
    pool.use("handed-in", SimpleNamespace(config=SimpleNamespace(dtype="float16")))
    ctx = replace(local_context(tmp_path / "out", Settings(worker_heartbeat_s=0.05)), engines=pool)
    presence = ComputePresence(lambda: ctx, name=WORKER).start()
    try:
        deadline = time.monotonic() + 10
        while not (report := {stats.model: stats for stats in ctx.workers.reports([WORKER])[WORKER]}):
            assert time.monotonic() < deadline, "the heartbeat never reported the worker's models"
            time.sleep(0.02)
        held = ctx.workers.models_of(WORKER)
    finally:
        presence.stop()
    assert WORKER not in ctx.workers.live_names()  # a worker that stops leaves at once
    assert set(report) == {"a", "b", "handed-in"}
    a, b, handed_in = report["a"], report["b"], report["handed-in"]
    assert (a.loads, a.evictions, a.loaded, a.dtype) == (1, 1, False, "float32")
    assert (b.loads, b.evictions, b.loaded) == (1, 0, True)
    assert b.resident_bytes == a.resident_bytes > 0 and a.load_seconds > 0 and b.load_seconds > 0
    # loaded, but not by the pool: named held (GET /v1/models, routing), nothing counted
    assert (handed_in.loaded, handed_in.dtype, handed_in.loads, handed_in.resident_bytes) == (True, UNKNOWN_DTYPE, 0, 0)
    assert held == {"b", "handed-in"}
