"""A tenant's webhook delivery slots, in Redis (a real server) and in memory: at most ``limit`` taken per
tenant, each tenant apart, a slot given back or expired is free again."""
import pytest
import redis
from support.job_doubles import FakeClock

from poolq.products.webhooks.delivery_slots import InMemoryDeliverySlots, RedisDeliverySlots


@pytest.fixture(params=["redis", "memory"])
def slots_and_clock(request):
    clock = FakeClock()
    if request.param == "memory":
        yield InMemoryDeliverySlots(clock), clock
        return
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    client.delete(*client.keys("poolq:webhooks:in_flight:*") or ["none"])
    yield RedisDeliverySlots(client, clock), clock
    client.close()


def test_a_tenant_takes_at_most_its_limit_and_another_tenant_is_apart(slots_and_clock):
    slots, _ = slots_and_clock
    first, second = slots.take("a", 2, 30), slots.take("a", 2, 30)
    assert first and second and first != second
    assert slots.take("a", 2, 30) is None and slots.in_flight("a") == 2
    assert slots.take("b", 2, 30) is not None and slots.in_flight("b") == 1  # a's slots cost b nothing
    slots.give_back("a", first)
    assert slots.in_flight("a") == 1
    assert slots.take("a", 2, 30) is not None


def test_a_slot_nobody_gave_back_expires(slots_and_clock):
    slots, clock = slots_and_clock
    assert slots.take("a", 1, 30) is not None
    clock.advance(29)
    assert slots.take("a", 1, 30) is None
    clock.advance(2)  # its worker died mid-attempt: the slot is free after its ttl
    assert slots.in_flight("a") == 0
    token = slots.take("a", 1, 30)
    assert token is not None
    slots.give_back("a", "a-token-long-gone")  # giving back one that is not there changes nothing
    assert slots.in_flight("a") == 1
