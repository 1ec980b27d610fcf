"""The tenants' daily token counters, Redis (real server) and in memory: a unit counts once, each
tenant and each UTC day apart, and a refusal waits until the next midnight UTC."""
from datetime import datetime, timedelta, timezone

import pytest
import redis

from poolq.jobs.coordination.tenant_day_usage import (
    InMemoryTenantDayUsage,
    RedisTenantDayUsage,
    seconds_to_day_end,
    utc_day,
)

NOON = datetime(2026, 12, 5, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def usage(request):
    if request.param == "memory":
        return InMemoryTenantDayUsage()
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    client.delete(*(f"poolq:tenant_tokens:{t}:20261205{s}" for t in ("acme", "other") for s in ("", ":units")))
    return RedisTenantDayUsage(client)


def test_a_unit_counts_once_per_tenant_and_day(usage):
    assert usage.add("acme", "job1/shard-00000", 40, NOON) == 40
    assert usage.add("acme", "job1/shard-00000", 40, NOON) == 40  # redelivered: not again
    assert usage.add("acme", "job1/shard-00001", 2, NOON) == 42
    assert usage.total("acme", NOON) == 42 and usage.total("other", NOON) == 0
    assert usage.total("acme", NOON + timedelta(days=1)) == 0  # the next UTC day starts at nothing


def test_the_day_ends_at_midnight_utc():
    assert utc_day(datetime(2026, 12, 5, 23, 30, tzinfo=timezone(timedelta(hours=-5)))) == "20261206"
    assert seconds_to_day_end(NOON) == 12 * 3600
    assert seconds_to_day_end(datetime(2026, 12, 5, 23, 59, 59, 500_000, tzinfo=timezone.utc)) == 1
