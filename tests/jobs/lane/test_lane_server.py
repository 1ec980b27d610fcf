"""The lane's serving thread: it answers requests until stopped, outlives a failing lane, and
finishes the request in hand when stopped."""
import threading

import numpy as np
import pytest

from poolq.jobs.lane.embedding_lane import LaneTimeout
from poolq.jobs.lane.lane_messages import EmbeddingReply, EmbeddingRequest
from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.worker.lane.lane_server import LaneServer

MODEL = "all-MiniLM-L6-v2"
WAIT_S = 120


class FlakyLane(InMemoryEmbeddingLane):
    """Fails its first ``failures`` takes, as a lane over Redis does while Redis is away."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def take(self, wait_s):
        if self.failures:
            self.failures -= 1
            raise ConnectionError("Redis is away")
        return super().take(wait_s)


def test_the_server_answers_requests_until_stopped(local_ctx, minilm_engine):
    lane = InMemoryEmbeddingLane()
    with LaneServer(lane, lambda: local_ctx.engines, poll_s=0.05):
        replies = [lane.call(EmbeddingRequest(model=MODEL, inputs=[f"query {i}"]), WAIT_S) for i in range(3)]
    assert [reply.count for reply in replies] == [1, 1, 1]
    expected = minilm_engine.embed(["query 2"])
    np.testing.assert_allclose(replies[2].vectors(), expected, atol=1e-6)


def test_the_server_outlives_a_failing_lane(local_ctx):
    lane = FlakyLane(failures=2)
    with LaneServer(lane, lambda: local_ctx.engines, poll_s=0.05, retry_s=0.01):
        assert lane.call(EmbeddingRequest(model=MODEL, inputs=["after the outage"]), WAIT_S).count == 1
    assert lane.failures == 0


def test_a_stopped_server_takes_nothing_more(local_ctx):
    lane = InMemoryEmbeddingLane()
    server = LaneServer(lane, lambda: local_ctx.engines, poll_s=0.05).start()
    server.stop(WAIT_S)
    with pytest.raises(LaneTimeout):
        lane.call(EmbeddingRequest(model=MODEL, inputs=["nobody serves this"]), 0.3)


def test_stopping_finishes_the_request_in_hand(local_ctx):
    # Given a server answering a request whose engine pool is slow to come (a model loading)
    lane = InMemoryEmbeddingLane()
    taken, release = threading.Event(), threading.Event()

    def slow_engines():
        taken.set()
        release.wait(WAIT_S)
        return local_ctx.engines

    server = LaneServer(lane, slow_engines, poll_s=0.05).start()
    replies: list[EmbeddingReply] = []
    caller = threading.Thread(target=lambda: replies.append(lane.call(EmbeddingRequest(model=MODEL, inputs=["x"]), WAIT_S)))
    caller.start()
    taken.wait(WAIT_S)
    # When it is told to stop while the request is in hand
    stopper = threading.Thread(target=server.stop, args=(WAIT_S,))
    stopper.start()
    release.set()
    stopper.join(WAIT_S)
    caller.join(WAIT_S)
    # Then the request was answered all the same
    assert [reply.count for reply in replies] == [1]
