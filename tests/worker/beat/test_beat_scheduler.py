"""PoolqBeatScheduler on a real redis-server of its own: restarts, wipes and a second beat.

Stock RedBeat raises out of ``celery beat`` when a tick meets a refused connection or a lost
lock; these tests drive the scheduler's ticks directly against a Redis that is stopped,
restarted and wiped, and count the reconciler's messages that really reach the queue.
"""
import time
from types import SimpleNamespace

import pytest
import redis
from redbeat.schedulers import acquire_distributed_beat_lock

from poolq.devtools.devstack.ports import ANY_PORT
from poolq.devtools.devstack.redis_server import RedisConfig, RedisServer
from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE
from poolq.jobs.settings import Settings
from poolq.worker.beat.beat_scheduler import PoolqBeatScheduler
from poolq.worker.celery_app import create_celery_app

pytestmark = pytest.mark.integration

INTERVAL_S = 0.2


@pytest.fixture
def redis_server(tmp_path):
    with RedisServer(RedisConfig(data_dir=tmp_path / "redis", port=ANY_PORT)) as server:
        yield server


@pytest.fixture
def app(redis_server):
    return create_celery_app(Settings(redis_url=redis_server.url, reconcile_interval_s=INTERVAL_S))


def _started_beat(app) -> PoolqBeatScheduler:
    """A scheduler as `celery beat` starts it: RedBeat's beat_init handler takes the lock."""
    scheduler = PoolqBeatScheduler(app=app, max_interval=0.5)
    acquire_distributed_beat_lock(sender=SimpleNamespace(scheduler=scheduler))
    return scheduler


def _queued(app) -> int:
    return redis.Redis.from_url(app.conf.broker_url).llen(CONTROL_QUEUE)


def _tick_until_sent(scheduler, app, *, timeout_s: float = 10.0) -> None:
    before = _queued(app)
    deadline = time.monotonic() + timeout_s
    while _queued(app) <= before:
        assert time.monotonic() < deadline, "the reconciler was not sent"
        time.sleep(min(scheduler.tick(), 0.1))


def test_a_tick_while_redis_is_down_waits_instead_of_raising_and_firing_resumes(app, redis_server):
    # Given a beat that holds the lock and fires the reconciler
    scheduler = _started_beat(app)
    _tick_until_sent(scheduler, app)
    # When Redis stops
    redis_server.stop()
    # Then ticks return the retry interval instead of raising (stock RedBeat exits here)
    assert [scheduler.tick() for _ in range(3)] == [scheduler.retry_interval_s] * 3
    # And once Redis is back (its AOF kept the lock and the entries), the reconciler fires again
    redis_server.start()
    redis_server.wait_ready()
    _tick_until_sent(scheduler, app)
    assert scheduler.lock.owned()


def test_after_a_wipe_the_beat_takes_its_lock_again_and_restores_the_reconciler_entry(app):
    # Given a beat that fires the reconciler
    scheduler = _started_beat(app)
    _tick_until_sent(scheduler, app)
    client = redis.Redis.from_url(app.conf.broker_url)
    entry_key = app.redbeat_conf.key_prefix + "poolq-reconcile"
    # When Redis loses everything: the lock, the entries, the queue
    client.flushall()
    assert not client.exists(entry_key)
    # Then the beat owns the lock again, re-installs the entry and fires
    _tick_until_sent(scheduler, app)
    assert scheduler.lock.owned() and client.exists(entry_key)


def test_after_a_wipe_a_second_beat_that_took_the_lock_fires_alone(app):
    # Given beat A firing, and Redis wiped
    beat_a = _started_beat(app)
    _tick_until_sent(beat_a, app)
    client = redis.Redis.from_url(app.conf.broker_url)
    client.flushall()
    # When beat B takes the free lock first
    beat_b = _started_beat(app)
    assert beat_b.lock.owned()
    # Then A stands by: its ticks send nothing while B holds the lock
    for _ in range(5):
        assert beat_a.tick() == beat_a.max_interval
        time.sleep(INTERVAL_S / 2)
    assert _queued(app) == 0 and not beat_a.lock.owned()
    # And when B stops (releasing the lock), A takes over and fires
    beat_b.close()
    _tick_until_sent(beat_a, app)
    assert beat_a.lock.owned()
