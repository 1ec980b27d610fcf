"""One contract for the lease store: Redis (real server) and the in-memory one.

Expiry is driven by a fake clock for the in-memory store and by a real (short) TTL on Redis.
"""
import time
import uuid
from dataclasses import dataclass
from typing import Callable

import pytest
import redis
from support.job_doubles import FakeClock

from poolq.jobs.coordination.leases import InMemoryLeaseStore, LeaseKeeper, LeaseStore, RedisLeaseStore, lease_held


@dataclass
class Leases:
    store: LeaseStore
    ttl_s: float  # TTL to acquire with in the expiry tests
    lapse: Callable[[], None]  # let every lease acquired with ``ttl_s`` expire


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def leases(request) -> Leases:
    if request.param == "memory":
        clock = FakeClock()
        return Leases(InMemoryLeaseStore(clock=clock), 30.0, lambda: clock.advance(31.0))
    store = RedisLeaseStore(redis.Redis.from_url(request.getfixturevalue("redis_url")))
    return Leases(store, 0.05, lambda: time.sleep(0.12))  # Redis expires keys on its own clock


@pytest.fixture
def job_id() -> str:
    return uuid.uuid4().hex


def test_a_lease_excludes_others_until_released(leases, job_id):
    store = leases.store
    first = store.acquire(job_id, "shard-00000", 60)
    assert first is not None and first.crashes_before == 0 and store.holder(job_id, "shard-00000") == first.attempt
    assert store.acquire(job_id, "shard-00000", 60) is None
    # Other units and other jobs are independent
    assert store.acquire(job_id, "shard-00001", 60) is not None
    assert store.acquire(uuid.uuid4().hex, "shard-00000", 60) is not None
    store.release(first)
    assert store.holder(job_id, "shard-00000") is None
    second = store.acquire(job_id, "shard-00000", 60)
    assert second is not None and second.attempt != first.attempt


def test_a_lease_excludes_others_until_it_expires(leases, job_id):
    lease = leases.store.acquire(job_id, "plan", leases.ttl_s)
    assert lease is not None and leases.store.acquire(job_id, "plan", leases.ttl_s) is None
    leases.lapse()
    assert leases.store.holder(job_id, "plan") is None
    assert leases.store.acquire(job_id, "plan", 60) is not None


def test_only_the_holder_renews(leases, job_id):
    store = leases.store
    lease = store.acquire(job_id, "finalize", leases.ttl_s)
    assert store.renew(lease, 60)  # now long-lived: the lapse below does not end it
    leases.lapse()
    assert store.holder(job_id, "finalize") == lease.attempt
    store.release(lease)
    other = store.acquire(job_id, "finalize", 60)
    assert not store.renew(lease, 60)  # the old holder cannot take it back
    assert store.holder(job_id, "finalize") == other.attempt


def test_an_expired_lease_cannot_be_renewed(leases, job_id):
    lease = leases.store.acquire(job_id, "shard-00002", leases.ttl_s)
    leases.lapse()
    assert not leases.store.renew(lease, 60)
    assert leases.store.holder(job_id, "shard-00002") is None


def test_release_by_a_non_holder_does_nothing(leases, job_id):
    store = leases.store
    stale = store.acquire(job_id, "shard-00000", leases.ttl_s)
    leases.lapse()
    current = store.acquire(job_id, "shard-00000", 60)
    store.release(stale)  # the lapsed attempt finishes late: it must not free the new holder's lease
    assert store.holder(job_id, "shard-00000") == current.attempt
    assert store.acquire(job_id, "shard-00000", 60) is None


def test_attempts_that_never_released_count_as_crashes(leases, job_id):
    store = leases.store
    # Given two attempts that finish cleanly
    for _ in range(2):
        lease = store.acquire(job_id, "shard-00003", 60)
        assert lease.crashes_before == 0
        store.release(lease)
    # When one attempt dies without releasing (its lease expires)
    store.acquire(job_id, "shard-00003", leases.ttl_s)
    leases.lapse()
    # Then the next attempt sees one crash, and a second crash makes two
    lease = store.acquire(job_id, "shard-00003", leases.ttl_s)
    assert lease.crashes_before == 1
    leases.lapse()
    lease = store.acquire(job_id, "shard-00003", 60)
    assert lease.crashes_before == 2
    # A clean release does not add one; counts are per unit
    store.release(lease)
    assert store.acquire(job_id, "shard-00003", 60).crashes_before == 2
    assert store.acquire(job_id, "shard-00004", 60).crashes_before == 0


def test_live_units_lists_only_live_leases_of_the_job(leases, job_id):
    store = leases.store
    assert store.live_units(job_id) == []
    kept = store.acquire(job_id, "shard-00001", 60)
    store.acquire(job_id, "plan", 60)
    store.acquire(job_id, "shard-00000", leases.ttl_s)
    released = store.acquire(job_id, "finalize", 60)
    store.release(released)
    store.acquire(job_id + "x", "shard-00009", 60)  # another job whose id starts with this one's
    store.acquire(uuid.uuid4().hex, "shard-00007", 60)
    leases.lapse()
    assert store.live_units(job_id) == ["plan", "shard-00001"]
    store.release(kept)
    assert store.live_units(job_id) == ["plan"]


def test_forget_drops_the_crash_counts(leases, job_id):
    store = leases.store
    store.acquire(job_id, "shard-00000", leases.ttl_s)
    leases.lapse()
    store.release(store.acquire(job_id, "shard-00000", 60))
    store.forget(job_id)
    assert store.acquire(job_id, "shard-00000", 60).crashes_before == 0


def test_last_started_says_when_each_unit_last_had_its_lease_taken(leases, job_id):
    store = leases.store
    before = time.time()
    store.release(store.acquire(job_id, "shard-00000", 60))
    store.acquire(job_id, "plan", 60)
    started = store.last_started(job_id)
    assert set(started) == {"shard-00000", "plan"}
    assert all(before <= at <= time.time() for at in started.values())
    assert store.acquire(job_id, "plan", 60) is None  # a refused acquire is no start
    assert store.last_started(job_id) == started
    assert store.last_started(uuid.uuid4().hex) == {}
    store.forget(job_id)
    assert store.last_started(job_id) == {}


# LeaseKeeper runs a real thread that waits ttl/3 of real time between renewals, so these use
# the stores' real clocks and a short TTL.
@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def real_time_leases(request) -> LeaseStore:
    if request.param == "memory":
        return InMemoryLeaseStore()
    return RedisLeaseStore(redis.Redis.from_url(request.getfixturevalue("redis_url")))


def test_the_keeper_keeps_a_short_lease_alive_past_its_ttl(real_time_leases, job_id):
    ttl_s = 0.15
    lease = real_time_leases.acquire(job_id, "shard-00000", ttl_s)
    with LeaseKeeper(real_time_leases, lease, ttl_s) as keeper:
        time.sleep(ttl_s * 4)
        assert real_time_leases.holder(job_id, "shard-00000") == lease.attempt
        assert real_time_leases.acquire(job_id, "shard-00000", ttl_s) is None
    assert not keeper.lost.is_set()
    # After the keeper stops, the lease lapses on its own
    time.sleep(ttl_s * 2)
    assert real_time_leases.holder(job_id, "shard-00000") is None


def test_the_keeper_says_lost_when_the_lease_was_taken(real_time_leases, job_id):
    ttl_s = 0.15
    lease = real_time_leases.acquire(job_id, "shard-00000", ttl_s)
    with LeaseKeeper(real_time_leases, lease, ttl_s) as keeper:
        # Given another attempt takes the unit (here: the lease is ended and re-acquired)
        real_time_leases.release(lease)
        thief = real_time_leases.acquire(job_id, "shard-00000", 60)
        # Then the keeper's next renewal fails and says so, without taking the unit back
        assert keeper.lost.wait(ttl_s * 4)
    assert real_time_leases.holder(job_id, "shard-00000") == thief.attempt


def test_a_lease_held_for_a_block_is_released_after_it_and_none_while_another_holds_it(leases, job_id):
    store = leases.store
    with lease_held(store, job_id, "plan", 60) as lease:
        assert lease is not None and store.holder(job_id, "plan") == lease.attempt
        with lease_held(store, job_id, "plan", 60) as second:
            assert second is None  # another attempt holds the unit
        assert store.holder(job_id, "plan") == lease.attempt  # the refused block released nothing
    assert store.holder(job_id, "plan") is None


def test_a_lease_held_for_a_block_that_raises_is_released(leases, job_id):
    with pytest.raises(RuntimeError, match="stage failed"):
        with lease_held(leases.store, job_id, "plan", 60):
            raise RuntimeError("stage failed")
    assert leases.store.holder(job_id, "plan") is None
