"""One contract for fair share: Redis (a real server) and the in-memory one."""
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from poolq.jobs.coordination.memory_fair_share import InMemoryFairShare
from poolq.jobs.coordination.redis_fair_share import RedisFairShare


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def fair(request):
    if request.param == "memory":
        yield InMemoryFairShare()
        return
    client = redis.Redis.from_url(request.getfixturevalue("redis_url").rsplit("/", 1)[0] + "/9")
    client.flushdb()  # a database of its own: the tenants' rotation is global
    yield RedisFairShare(client)
    client.flushdb()


def _job() -> str:
    return uuid.uuid4().hex


def test_shards_go_out_in_order_up_to_the_capacity_and_stop_at_the_last(fair):
    job = _job()
    fair.open(job, "acme", num_shards=5, shard_cost=100)
    assert [(c.job_id, c.shard) for c in fair.claim(3)] == [(job, 0), (job, 1), (job, 2)]
    assert fair.claim(3) == []  # every slot taken
    fair.release(job, 1)
    assert [c.shard for c in fair.claim(3)] == [3]
    fair.release(job, 0)
    fair.release(job, 2)
    assert [c.shard for c in fair.claim(3)] == [4]  # the last shard; nothing past it
    assert fair.in_flight(job) == [3, 4] and fair.cursor(job) == 5 and fair.in_flight_total() == 2


def test_two_tenants_take_turns_whatever_their_jobs_sizes(fair):
    big, small = _job(), _job()
    fair.open(big, "a", num_shards=1000, shard_cost=100)
    first = fair.claim(1)
    fair.open(small, "b", num_shards=3, shard_cost=100)  # arrives while the big one runs
    order = [claim.job_id for claim in first]
    for _ in range(8):
        for job in (big, small):  # the running shard commits: its slot is free
            for shard in fair.in_flight(job):
                fair.release(job, shard)
        order += [claim.job_id for claim in fair.claim(1)]
    # The small job's shards come next to the big one's, one for one, until it is done
    assert order[:7] == [big, small, big, small, big, small, big] and order.count(small) == 3


def test_a_tenants_work_is_shared_by_cost_not_by_shard_count(fair):
    heavy, light = _job(), _job()
    fair.open(heavy, "a", num_shards=100, shard_cost=300)  # shards three times the work
    fair.open(light, "b", num_shards=100, shard_cost=100)
    given = Counter()
    for _ in range(40):
        for claim in fair.claim(1):
            given[claim.job_id] += 1
            fair.release(claim.job_id, claim.shard)
    assert given[light] == 3 * given[heavy]


def test_a_tenants_own_jobs_share_its_turns(fair):
    one, two, other = _job(), _job(), _job()
    fair.open(one, "a", num_shards=100, shard_cost=10)
    fair.open(two, "a", num_shards=100, shard_cost=10)
    fair.open(other, "b", num_shards=100, shard_cost=10)
    given = Counter()
    for _ in range(40):
        for claim in fair.claim(1):
            given[claim.job_id] += 1
            fair.release(claim.job_id, claim.shard)
    assert (given[one], given[two], given[other]) == (10, 10, 20)


def test_an_idle_tenant_earns_no_credit_to_burst_with(fair):
    early, late = _job(), _job()
    fair.open(early, "a", num_shards=100, shard_cost=10)
    for _ in range(30):  # tenant a runs alone for a while
        for claim in fair.claim(1):
            fair.release(claim.job_id, claim.shard)
    fair.open(late, "b", num_shards=100, shard_cost=10)
    order = []
    for _ in range(6):
        for claim in fair.claim(1):
            order.append(claim.job_id)
            fair.release(claim.job_id, claim.shard)
    assert order.count(late) == 3  # an equal share from now on, not 30 shards in a row


def test_a_closed_job_gets_no_more_slots_and_a_reopen_does_not_revive_it(fair):
    job, other = _job(), _job()
    fair.open(job, "a", num_shards=10, shard_cost=1)
    fair.claim(2)
    fair.close(job)
    fair.open(job, "a", num_shards=10, shard_cost=1)  # a late re-publish of its plan
    fair.open(other, "a", num_shards=10, shard_cost=1)
    fair.release(job, 0)
    fair.release(job, 1)
    assert {claim.job_id for claim in fair.claim(2)} == {other}
    assert fair.cursor(job) == 2


def test_a_forgotten_job_frees_its_slots_and_leaves_nothing(fair):
    job = _job()
    fair.open(job, "a", num_shards=10, shard_cost=1)
    fair.claim(4)
    fair.forget(job)
    assert fair.in_flight(job) == [] and fair.cursor(job) == 0 and fair.in_flight_total() == 0
    if isinstance(fair, RedisFairShare):
        assert fair.redis.keys(f"poolq:job:{job}:*") == []


def test_opening_again_keeps_the_cursor(fair):
    job = _job()
    fair.open(job, "a", num_shards=5, shard_cost=1)
    fair.claim(2)
    fair.open(job, "a", num_shards=5, shard_cost=1)
    assert fair.cursor(job) == 2 and fair.in_flight(job) == [0, 1]


def test_concurrent_claims_never_pass_the_capacity_or_repeat_a_shard(fair):
    job = _job()
    fair.open(job, "a", num_shards=100, shard_cost=1)
    with ThreadPoolExecutor(max_workers=8) as pool:
        claimed = [claim.shard for batch in pool.map(lambda _: fair.claim(4), range(32)) for claim in batch]
    assert sorted(claimed) == [0, 1, 2, 3]
