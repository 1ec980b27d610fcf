"""What each compute worker says of its models with its heartbeat, the same over Redis and in memory:
a report replaces the previous one and goes with its worker; the models loaded now (``models_of``,
``loaded_models``) and the totals per model (``model_totals``: /metrics, GET /v1/models) count only
live workers, each worker once per model however many dtypes it holds."""
import logging
import uuid

import pytest
import redis

from poolq.jobs.coordination.worker_model_stats import ModelTotals, WorkerModelStats
from poolq.jobs.coordination.worker_registry import InMemoryWorkerRegistry, RedisWorkerRegistry

NOW = 1000.0


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def registry(request):
    if request.param == "memory":
        return InMemoryWorkerRegistry()
    return RedisWorkerRegistry(redis.Redis.from_url(request.getfixturevalue("redis_url")))


@pytest.fixture
def names():
    """Worker and model names of this test's own (one Redis serves the whole session)."""
    tag = uuid.uuid4().hex[:8]
    return lambda name: f"{name}-{tag}"


def _stats(model, dtype="float32", loads=1, evictions=0, seconds=0.5, size=1000, loaded=True, in_use=0, device="cpu"):
    return WorkerModelStats(model, dtype, loads, evictions, seconds, size, loaded, in_use, device)


def _alive(registry, *workers, ttl_s=30.0):
    for worker in workers:
        registry.heartbeat(worker, ttl_s, now=NOW)


def test_a_report_is_read_back_replaced_by_the_next_and_forgotten_with_its_worker(registry, names):
    worker, a, b = names("w"), names("a"), names("b")
    _alive(registry, worker)
    first = (_stats(a, loads=2, evictions=1, in_use=1), _stats(b, "float16", loaded=False))
    registry.report_models(worker, first, ttl_s=30)
    assert registry.reports([worker]) == {worker: first}
    assert registry.models_of(worker) == {a}  # loaded now: not b, evicted
    registry.report_models(worker, [_stats(b)], ttl_s=30)
    assert registry.reports([worker, names("silent")]) == {worker: (_stats(b),), names("silent"): ()}
    assert registry.models_of(worker) == {b}
    registry.forget(worker)
    assert registry.reports([worker]) == {worker: ()} and registry.models_of(worker) == frozenset()


def test_loaded_models_count_live_workers_once_each(registry, names):
    one, two, gone = names("one"), names("two"), names("gone")
    a, b = names("a"), names("b")
    _alive(registry, one, two)
    registry.heartbeat(gone, ttl_s=5, now=NOW)
    registry.report_models(one, [_stats(a), _stats(a, "float16"), _stats(b, loaded=False)], ttl_s=30)
    registry.report_models(two, [_stats(a)], ttl_s=30)
    registry.report_models(gone, [_stats(a), _stats(b)], ttl_s=30)
    loaded = registry.loaded_models(now=NOW + 1)
    assert (loaded[a], loaded[b]) == (3, 1)  # gone's word has not run out yet
    loaded = registry.loaded_models(now=NOW + 10)
    assert loaded[a] == 2 and b not in loaded  # two dtypes on one worker: one worker; b held by nobody alive


def test_model_totals_sum_the_live_workers_reports(registry, names):
    one, two, gone = names("one"), names("two"), names("gone")
    a, b = names("a"), names("b")
    _alive(registry, one, two)
    registry.heartbeat(gone, ttl_s=5, now=NOW)
    registry.report_models(one, [_stats(a, loads=2, evictions=1, seconds=1.5, size=100),
                                 _stats(a, "float16", loads=1, seconds=0.25, size=50),
                                 _stats(b, loads=3, evictions=3, seconds=2.0, size=700, loaded=False)], ttl_s=30)
    registry.report_models(two, [_stats(a, loads=1, seconds=1.0, size=100)], ttl_s=30)
    registry.report_models(gone, [_stats(a, loads=50, seconds=99.0, size=100)], ttl_s=30)
    totals = registry.model_totals(now=NOW + 10)
    assert totals[a] == ModelTotals(a, loaded_workers=2, loads=4, evictions=1, load_seconds=2.75, resident_bytes=250)
    # b's memory was given back: it counts no bytes and no worker, but its loads and evictions stay counted
    assert totals[b] == ModelTotals(b, loaded_workers=0, loads=3, evictions=3, load_seconds=2.0, resident_bytes=0)


@pytest.mark.integration
def test_a_redis_report_expires_with_its_workers_word(redis_url, names):
    client = redis.Redis.from_url(redis_url)
    worker = names("w")
    RedisWorkerRegistry(client).report_models(worker, [_stats(names("a"))], ttl_s=15)
    assert 0 < client.pttl(f"poolq:compute:model-stats:{worker}") <= 15_000


@pytest.mark.integration
def test_an_unreadable_redis_report_counts_as_none(redis_url, names, caplog):
    client = redis.Redis.from_url(redis_url)
    registry, worker, other = RedisWorkerRegistry(client), names("w"), names("other")
    _alive(registry, worker, other)
    registry.report_models(other, [_stats(names("a"))], ttl_s=30)
    client.set(f"poolq:compute:model-stats:{worker}", '[{"model": "x", "written by": "another version"}]')
    with caplog.at_level(logging.WARNING, logger="poolq.jobs.coordination.worker_registry"):
        reports = registry.reports([worker, other])
    assert reports == {worker: (), other: (_stats(names("a")),)}
    assert f"worker {worker}: its model report is unreadable" in caplog.text


def test_the_engines_a_model_is_held_in_count_live_workers_holding_it_loaded(registry, names):
    a, b, c, gone = names("a"), names("b"), names("c"), names("gone")
    _alive(registry, a, b, c)
    cuda = {"device": "cuda"}
    registry.report_models(a, [_stats("m", "bfloat16", **cuda), _stats("other", "float32")], 30)
    registry.report_models(b, [_stats("m", "bfloat16", **cuda), _stats("m", "float32", loaded=False)], 30)
    registry.report_models(c, [_stats("m", "float32"), _stats("m", "unknown")], 30)
    registry.report_models(gone, [_stats("m", "float16")], 30)  # no heartbeat: not live
    assert registry.model_engines("m", now=NOW) == {("bfloat16", "cuda"): 2, ("float32", "cpu"): 1}
    assert registry.model_engines("absent", now=NOW) == {}
