"""What a sink load that finds its lease held needs to come back once it lapses: how long the lease
has left (in memory on a fake clock, in Redis on its own), and a load task sent with a countdown
(by Celery; in process, by a timer)."""
import threading
import uuid

import pytest
import redis
from support.job_doubles import FakeClock

from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, SINK_TASK, CeleryEnqueuer, InlineEnqueuer
from poolq.jobs.coordination.leases import InMemoryLeaseStore, RedisLeaseStore


def test_a_lease_says_how_long_it_has_left_in_memory():
    clock = FakeClock()
    leases = InMemoryLeaseStore(clock=clock)
    assert leases.expires_in("job", "sinks") is None
    lease = leases.acquire("job", "sinks", 60)
    clock.advance(15)
    assert leases.expires_in("job", "sinks") == 45
    leases.renew(lease, 60)
    assert leases.expires_in("job", "sinks") == 60
    clock.advance(60)
    assert leases.expires_in("job", "sinks") is None  # lapsed


@pytest.mark.integration
def test_a_lease_says_how_long_it_has_left_in_redis(redis_url):
    leases = RedisLeaseStore(redis.Redis.from_url(redis_url))
    job_id = uuid.uuid4().hex
    assert leases.expires_in(job_id, "sinks") is None
    lease = leases.acquire(job_id, "sinks", 60)
    assert 58 < leases.expires_in(job_id, "sinks") <= 60
    leases.release(lease)
    assert leases.expires_in(job_id, "sinks") is None


class SentTasks:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def send_task(self, name, args, queue, countdown=None):
        self.sent.append((name, args, queue, countdown))


def test_a_load_is_sent_to_the_control_queue_now_or_after_a_countdown():
    app = SentTasks()
    enqueuer = CeleryEnqueuer(app)
    enqueuer.load_sinks("job-1")
    enqueuer.load_sinks("job-1", countdown_s=61.0)
    assert app.sent == [(SINK_TASK, ["job-1"], CONTROL_QUEUE, None), (SINK_TASK, ["job-1"], CONTROL_QUEUE, 61.0)]


def test_in_process_a_load_with_a_countdown_runs_once_it_is_due():
    ran = threading.Event()
    enqueuer = InlineEnqueuer()
    enqueuer.bind(plan=None, plan_section=None, run_shard=None, finalize=None, load_sinks=lambda job_id: ran.set())
    enqueuer.load_sinks("job-1", countdown_s=0.2)
    assert not ran.is_set()  # not now: the load that holds the lease is still running
    assert ran.wait(5)
