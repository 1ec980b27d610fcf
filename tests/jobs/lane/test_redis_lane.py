"""What only the Redis lane has: its keys expire, so nothing piles up when nobody serves or reads it."""
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import redis

from poolq.jobs.lane.embedding_lane import LaneTimeout
from poolq.jobs.lane.lane_messages import EmbeddingReply, EmbeddingRequest
from poolq.jobs.lane.redis_lane import RedisEmbeddingLane

pytestmark = pytest.mark.integration


@pytest.fixture
def client(redis_url):
    return redis.Redis.from_url(redis_url)


@pytest.fixture
def lane(client):
    return RedisEmbeddingLane(client, namespace=f"test-lane:{uuid.uuid4().hex}")


def test_a_request_and_the_queue_expire_when_nobody_serves_the_lane(lane, client):
    # When a caller gives up on a request nobody took
    with pytest.raises(LaneTimeout):
        lane.call(EmbeddingRequest(model="m", inputs=["q"]), 0.3)
    # Then its request key has expired, and the queue of ids will expire too (or is gone already)
    assert client.keys(lane.request_key("*")) == []
    assert client.pttl(lane.queue_key) != -1  # -1: a key that would never expire


def test_a_reply_nobody_reads_expires(lane, client):
    with ThreadPoolExecutor(max_workers=1) as pool:
        taken = pool.submit(lane.take, 30)
        with pytest.raises(LaneTimeout):
            lane.call(EmbeddingRequest(model="m", inputs=["q"]), 0.5)
        late = taken.result()
    lane.reply(late, EmbeddingReply.of_vectors(np.zeros((1, 2), dtype=np.float32), 1, "e"))
    assert client.llen(lane.reply_key(late.request_id)) == 1
    assert client.pttl(lane.reply_key(late.request_id)) > 0


def test_a_request_this_worker_cannot_read_is_answered_with_a_failure(lane, client):
    # Given a request id whose payload is not a request this version reads (an API of another version)
    with ThreadPoolExecutor(max_workers=1) as pool:
        call = pool.submit(lane.call, EmbeddingRequest(model="m", inputs=["q"]), 30)
        # (rewrite the queued request before a worker takes it)
        request_id = None
        while request_id is None:
            ids = client.lrange(lane.queue_key, 0, -1)
            request_id = ids[0].decode() if ids else time.sleep(0.01)
        client.set(lane.request_key(request_id), b'{"model": "m", "inputs": [], "new_field": 1}', px=30_000)
        # When a worker takes it
        assert lane.take(0.5) is None
        # Then the caller hears a failure at once, not at its deadline
        assert call.result().failure == "the worker cannot read this request"


def test_waits_longer_than_the_clients_socket_timeout_are_fine(redis_url):
    # Given a lane over a client whose reads time out after 1 s (redis-py's default is 5 s)
    namespace = f"test-lane:{uuid.uuid4().hex}"
    lane = RedisEmbeddingLane(redis.Redis.from_url(redis_url, socket_timeout=1.0), namespace=namespace)
    # Then a caller waits past it for nothing and hears LaneTimeout, not a socket error
    with pytest.raises(LaneTimeout):
        lane.call(EmbeddingRequest(model="m", inputs=["q"]), 2.5)
    # and a worker waits past it for a request that comes late
    sender = RedisEmbeddingLane(redis.Redis.from_url(redis_url), namespace=namespace)
    with ThreadPoolExecutor(max_workers=2) as pool:
        taken = pool.submit(lane.take, 30)
        time.sleep(2.5)
        call = pool.submit(sender.call, EmbeddingRequest(model="m", inputs=["late"]), 30)
        got = taken.result()
        lane.reply(got, EmbeddingReply(failure="answered"))
        assert got.request.inputs == ["late"] and call.result().failure == "answered"
