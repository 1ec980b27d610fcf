"""Workers' measured throughput and the live set, the same over Redis and in memory: reports fold
into a decayed rate per worker, model and dtype; the registry names the workers alive now."""
import uuid

import pytest
import redis

from poolq.jobs.coordination.worker_registry import InMemoryWorkerRegistry, RedisWorkerRegistry
from poolq.jobs.coordination.worker_throughput import (
    DECAY,
    InMemoryThroughputBoard,
    RedisThroughputBoard,
    dtype_of,
)


def _redis(request):
    return redis.Redis.from_url(request.getfixturevalue("redis_url"))


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def board(request):
    return InMemoryThroughputBoard() if request.param == "memory" else RedisThroughputBoard(_redis(request))


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def registry(request):
    return InMemoryWorkerRegistry() if request.param == "memory" else RedisWorkerRegistry(_redis(request))


def test_reports_fold_into_a_decayed_rate_per_worker_and_dtype(board):
    model = f"model-{uuid.uuid4().hex}"  # one Redis for the session: a name of this test's own
    board.record("w1", model, "float32", tokens=1000, seconds=1.0, now=10)
    board.record("w1", model, "float32", tokens=3000, seconds=1.0, now=11)
    board.record("w1", model, "float16", tokens=8000, seconds=2.0, now=11)
    board.record("w2", "another-model", "float32", tokens=5, seconds=1.0)
    board.record("w1", model, "float32", tokens=0, seconds=1.0)  # nothing ran: not a measurement
    rates = {(rate.worker, rate.dtype): rate for rate in board.rates(model)}
    assert set(rates) == {("w1", "float32"), ("w1", "float16")}
    expected = (1000 * DECAY + 3000) / (1.0 * DECAY + 1.0)
    assert rates[("w1", "float32")].tokens_per_s == pytest.approx(expected)
    assert rates[("w1", "float32")].reported_at == 11 and rates[("w1", "float16")].tokens_per_s == 4000


def test_the_registry_names_the_workers_alive_now(registry):
    name = f"w-{uuid.uuid4().hex}"
    registry.heartbeat(name, ttl_s=30, now=1000)
    registry.heartbeat(name + "-old", ttl_s=5, now=1000)
    assert {name, name + "-old"} <= registry.live_names(now=1001)
    alive = registry.live_names(now=1010)
    assert name in alive and name + "-old" not in alive
    registry.forget(name)
    assert name not in registry.live_names(now=1010)


def test_the_dtype_is_read_from_the_engine_identity():
    assert dtype_of("sha256:abc/float16") == "float16" and dtype_of(None) == "unknown" and dtype_of("x") == "unknown"
