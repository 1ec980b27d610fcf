"""Which worker processes serve the interactive lane: the pool children of a worker consuming the
gpu queue, from their start (``worker_process_init``) to their exit; a control-only worker never."""
import numpy as np
import pytest
from celery.signals import worker_process_init, worker_process_shutdown

from poolq.jobs.lane.embedding_lane import LaneTimeout
from poolq.jobs.lane.lane_messages import EmbeddingRequest
from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.worker.lane import lane_startup
from poolq.worker.lane.lane_startup import lane_in_pool_children

REQUEST = EmbeddingRequest(model="all-MiniLM-L6-v2", inputs=["which worker answers?"])


@pytest.fixture
def lane(monkeypatch):
    """The lane each pool child would open over Redis, in process."""
    shared = InMemoryEmbeddingLane()
    monkeypatch.setattr(lane_startup.RedisEmbeddingLane, "from_settings", classmethod(lambda cls, settings: shared))
    return shared


def test_a_pool_child_of_a_compute_worker_serves_the_lane_until_it_exits(local_ctx, lane, minilm_engine):
    receivers = (len(worker_process_init.receivers), len(worker_process_shutdown.receivers))
    with lane_in_pool_children(local_ctx.settings, lambda: local_ctx, ("control", "gpu")):
        # When a pool child starts (the signal Celery sends in it, after fork)
        worker_process_init.send(sender=None)
        # Then it answers lane requests on its context's engines
        reply = lane.call(REQUEST, 120)
        np.testing.assert_allclose(reply.vectors(), minilm_engine.embed(REQUEST.inputs), atol=1e-6)
        # and once it exits, it answers no more
        worker_process_shutdown.send(sender=None)
        with pytest.raises(LaneTimeout):
            lane.call(REQUEST, 0.3)
    # The worker's hooks are gone with it
    assert (len(worker_process_init.receivers), len(worker_process_shutdown.receivers)) == receivers


def test_a_control_worker_serves_no_lane(local_ctx, lane):
    def no_context():
        raise AssertionError("a control worker built a context for the lane")

    with lane_in_pool_children(local_ctx.settings, no_context, ("control",)):
        worker_process_init.send(sender=None)
        with pytest.raises(LaneTimeout):
            lane.call(REQUEST, 0.3)
