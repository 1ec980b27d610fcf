"""One contract for the interactive lane: Redis (a real server) and the in-process one.

The API side sends a request and waits for its reply until a deadline; the worker side takes
requests and replies. Expiry uses short real timeouts (Redis expires keys on its own clock); no
test asserts how long anything took.
"""
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import redis

from poolq.jobs.lane.embedding_lane import LaneTimeout, TakenRequest
from poolq.jobs.lane.lane_messages import EmbeddingReply, EmbeddingRequest, InputError
from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.jobs.lane.redis_lane import RedisEmbeddingLane
from poolq.jobs.spec.job_spec import LongDocuments

WAIT_S = 30  # long enough never to be reached by a lane that works
SHORT_S = 0.2  # a deadline meant to pass


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def lane(request):
    if request.param == "memory":
        return InMemoryEmbeddingLane()
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    return RedisEmbeddingLane(client, namespace=f"test-lane:{uuid.uuid4().hex}")  # one lane per test


@pytest.fixture
def pool():
    with ThreadPoolExecutor(max_workers=4) as threads:
        yield threads


def _request(*inputs, **options) -> EmbeddingRequest:
    return EmbeddingRequest(model="all-MiniLM-L6-v2", inputs=list(inputs) or ["a query"], **options)


def _reply_naming(taken: TakenRequest) -> EmbeddingReply:
    """A reply that says which request it answers (its first input's length, as a vector)."""
    first = taken.request.inputs[0]
    return EmbeddingReply.of_vectors(np.array([[float(len(first)), 0.5]], dtype=np.float32), len(first), "engine")


def test_a_request_gets_its_reply(lane, pool):
    # Given a request with a job's options, and a worker that takes it and replies
    request = _request("first text", "second", dimensions=2, long_documents=LongDocuments(mode="truncate"))
    vectors = np.array([[0.25, -1.5], [3.0, 1e-8]], dtype=np.float32)
    taken_box: list[TakenRequest] = []

    def worker():
        taken = lane.take(WAIT_S)
        taken_box.append(taken)
        lane.reply(taken, EmbeddingReply.of_vectors(vectors, 11, "sha256:abc/float32"))

    served = pool.submit(worker)
    # When the API side calls
    reply = lane.call(request, WAIT_S)
    served.result()
    # Then the worker saw the request as sent, with its deadline ahead, and the caller got the reply, exactly
    [taken] = taken_box
    assert taken.request == request and taken.request.long_documents.mode.value == "truncate"
    assert 0 < taken.remaining_s <= WAIT_S
    np.testing.assert_array_equal(reply.vectors(), vectors)
    assert (reply.prompt_tokens, reply.engine, reply.errors, reply.failure) == (11, "sha256:abc/float32", [], None)


def test_token_arrays_errors_and_failures_travel_as_sent(lane, pool):
    request = _request([101, 7592, 2088], [0])
    errors = [InputError(index=1, code="document_too_long", message="document has 900 tokens")]

    def worker():
        taken = lane.take(WAIT_S)
        assert taken.request.inputs == [[101, 7592, 2088], [0]]
        lane.reply(taken, EmbeddingReply(errors=errors))
        lane.reply(lane.take(WAIT_S), EmbeddingReply(failure="RuntimeError: the device failed"))

    served = pool.submit(worker)
    assert lane.call(request, WAIT_S).errors == errors
    assert lane.call(request, WAIT_S).failure == "RuntimeError: the device failed"
    served.result()


def test_each_caller_gets_its_own_reply(lane, pool):
    # Given two callers waiting at once
    calls = [pool.submit(lane.call, _request("x" * size), WAIT_S) for size in (3, 5)]
    # When a worker takes both and answers the second first
    first, second = lane.take(WAIT_S), lane.take(WAIT_S)
    lane.reply(second, _reply_naming(second))
    lane.reply(first, _reply_naming(first))
    # Then each caller got the reply to its own request
    assert [call.result().prompt_tokens for call in calls] == [3, 5]


def test_taking_waits_and_returns_none_when_nothing_comes(lane):
    assert lane.take(SHORT_S) is None


def test_a_request_past_its_deadline_is_dropped_not_taken(lane):
    # Given a request nobody took before its deadline
    with pytest.raises(LaneTimeout):
        lane.call(_request(), SHORT_S)
    # Then a worker that comes afterwards finds nothing to run
    assert lane.take(SHORT_S) is None


def test_a_worker_that_never_answers_gives_the_caller_a_timeout(lane, pool):
    # Given a worker that takes the request and then never answers (it died, say)
    taken = pool.submit(lane.take, WAIT_S)
    # Then the caller hears LaneTimeout at its deadline, not a hang
    with pytest.raises(LaneTimeout):
        lane.call(_request(), 1.0)
    assert taken.result() is not None


def test_a_late_reply_reaches_nobody_and_the_next_caller_gets_its_own(lane, pool):
    # Given a request whose caller gave up before the worker answered
    taken = pool.submit(lane.take, WAIT_S)
    with pytest.raises(LaneTimeout):
        lane.call(_request("abc"), 1.0)
    late = taken.result()
    lane.reply(late, _reply_naming(late))  # answered after all: nobody reads it
    # When the next caller sends another request
    call = pool.submit(lane.call, _request("abcdefg"), WAIT_S)
    fresh = lane.take(WAIT_S)
    lane.reply(fresh, _reply_naming(fresh))
    # Then it gets the reply to its own request, not the late one
    assert call.result().prompt_tokens == 7
