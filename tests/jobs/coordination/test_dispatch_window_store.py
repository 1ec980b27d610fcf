"""One contract for the dispatch window: Redis (real server) and the in-memory one."""
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from poolq.jobs.coordination.dispatch_window import InMemoryDispatchWindow, RedisDispatchWindow


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def window(request):
    if request.param == "memory":
        return InMemoryDispatchWindow()
    return RedisDispatchWindow(redis.Redis.from_url(request.getfixturevalue("redis_url")))


def test_claims_fill_the_window_in_order_and_stop_at_the_last_shard(window):
    job = uuid.uuid4().hex
    assert window.claim(job, 3, 5) == [0, 1, 2]
    assert window.claim(job, 3, 5) == []  # full
    window.release(job, 1)
    assert window.claim(job, 3, 5) == [3]
    window.release(job, 0)
    window.release(job, 2)
    assert window.claim(job, 3, 5) == [4]  # the last shard; nothing past it
    assert window.in_flight(job) == [3, 4] and window.cursor(job) == 5


def test_concurrent_claims_never_overfill_the_window_or_repeat_a_shard(window):
    job = uuid.uuid4().hex
    with ThreadPoolExecutor(max_workers=8) as pool:
        claimed = [shard for batch in pool.map(lambda _: window.claim(job, 4, 100), range(32)) for shard in batch]
    assert sorted(claimed) == [0, 1, 2, 3]


def test_an_expired_window_is_gone(window):
    job = uuid.uuid4().hex
    window.claim(job, 2, 10)
    window.expire(job, 1)
    if isinstance(window, RedisDispatchWindow):
        keys = RedisDispatchWindow._keys(job)
        assert all(0 < window.redis.ttl(key) <= 1 for key in keys)
    else:
        assert window.in_flight(job) == [] and window.cursor(job) == 0
