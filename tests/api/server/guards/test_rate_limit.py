"""Per-tenant token buckets: bursts up to `burst`, then `rate_per_s`, with a Retry-After hint."""
import pytest
import redis

from poolq.api.server.guards.rate_limit import InMemoryRateLimiter, RedisRateLimiter


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_in_memory_bucket_allows_a_burst_then_refills_per_tenant():
    clock = _Clock()
    limiter = InMemoryRateLimiter(rate_per_s=0.5, burst=3, clock=clock)
    assert [limiter.take("a").allowed for _ in range(4)] == [True, True, True, False]
    assert limiter.take("a").retry_after_s == 2  # one token per 2 s
    assert limiter.take("b").allowed  # another tenant has its own bucket
    clock.now += 2
    assert limiter.take("a").allowed and not limiter.take("a").allowed


@pytest.mark.integration
def test_redis_bucket_is_shared_and_says_when_to_retry(redis_url):
    client = redis.Redis.from_url(redis_url)
    first, second = RedisRateLimiter(client, 0.1, 2), RedisRateLimiter(client, 0.1, 2)  # two API processes
    tenant = "rl-test-tenant"
    client.delete(f"poolq:ratelimit:{tenant}")
    assert [first.take(tenant).allowed, second.take(tenant).allowed] == [True, True]
    refused = first.take(tenant)
    assert not refused.allowed and 1 <= refused.retry_after_s <= 10


def test_peek_spends_nothing_in_memory():
    limiter = InMemoryRateLimiter(rate_per_s=0.01, burst=1, clock=_Clock())
    assert [limiter.peek("a").allowed for _ in range(3)] == [True] * 3
    assert limiter.take("a").allowed and not limiter.peek("a").allowed and not limiter.take("a").allowed


@pytest.mark.integration
def test_redis_peek_spends_nothing_and_namespaces_keep_buckets_apart(redis_url):
    client = redis.Redis.from_url(redis_url)
    tenants, failures = RedisRateLimiter(client, 0.01, 1), RedisRateLimiter(client, 0.01, 1, namespace="authfail")
    key = "peek-test"
    client.delete(f"poolq:ratelimit:{key}", f"poolq:authfail:{key}")
    assert [failures.peek(key).allowed for _ in range(3)] == [True] * 3
    assert failures.take(key).allowed and not failures.peek(key).allowed
    assert tenants.take(key).allowed  # the same name in another namespace has its own bucket
