"""A compute pool child has its worker consume the queue of each model it loads, and give up the queue
of a model it unloaded once nothing waits there and routing no longer counts it a holder."""
from collections import Counter

import pytest

from poolq.jobs.coordination.enqueuer import model_queue
from poolq.jobs.engine_pool import EngineStats
from poolq.worker.model_queues import ModelQueues

NODE = "poolq-compute@host"
A, B = model_queue("model-a"), model_queue("model-b")


class Control:
    """Records the remote-control requests (celery's ``app.control``); ``fail`` makes the next one raise."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, list[str]]] = []
        self.fail = False

    def add_consumer(self, queue, *, destination):
        self._request("add", queue, destination)

    def cancel_consumer(self, queue, *, destination):
        self._request("cancel", queue, destination)

    def _request(self, kind, queue, destination):
        if self.fail:
            self.fail = False
            raise ConnectionError("broker down")
        self.requests.append((kind, queue, destination))


class Child:
    """What the pool child's EnginePool holds and loaded so far, and what waits in each queue."""

    def __init__(self) -> None:
        self._loaded: frozenset[str] = frozenset()
        self.loads: Counter[str] = Counter()
        self.depths: dict[str, int] = {}

    @property
    def loaded(self) -> frozenset[str]:
        return self._loaded

    @loaded.setter
    def loaded(self, models: frozenset[str]) -> None:
        self.loads.update(models - self._loaded)
        self._loaded = models

    def stats(self):
        return [EngineStats(model, "float32", loads, 0, 0.1, 1000, model in self._loaded, 0)
                for model, loads in self.loads.items()]


@pytest.fixture
def child():
    return Child()


def _follower(child, control, **options) -> ModelQueues:
    return ModelQueues(control, NODE, lambda: child, lambda queue: child.depths.get(queue, 0), **options)


def test_a_model_loaded_later_has_its_queue_consumed_once_and_a_warm_one_is_not_asked_again(child):
    control = Control()
    follower = _follower(child, control, consuming=frozenset({A}), grace_s=5.0)
    child.loaded = frozenset({"model-a"})  # the warm model: its queue is in the worker's list already
    follower.follow(now=0.0)
    assert control.requests == []
    child.loaded = frozenset({"model-a", "model-b"})  # a shard of model-b came through the general queue
    follower.follow(now=1.0)
    follower.follow(now=2.0)
    assert control.requests == [("add", B, [NODE])]


def test_an_unloaded_model_queue_is_given_up_after_the_grace_once_nothing_waits_there(child):
    control = Control()
    follower = _follower(child, control, consuming=frozenset({A}), grace_s=5.0)
    child.loaded = frozenset({"model-a"})
    follower.follow(now=0.0)
    child.loaded = frozenset({"model-b"})  # the memory bound unloaded model-a for model-b
    child.depths = {A: 1}  # routed there while this worker still counted as its holder
    follower.follow(now=1.0)
    assert control.requests == [("add", B, [NODE])]
    follower.follow(now=7.0)  # past the grace, but a task waits: it is taken first (loading model-a again)
    assert control.requests == [("add", B, [NODE])]
    child.depths = {}
    follower.follow(now=8.0)
    follower.follow(now=9.0)
    assert control.requests == [("add", B, [NODE]), ("cancel", A, [NODE])]
    # and when model-a is loaded again, its queue is consumed again
    child.loaded = frozenset({"model-a"})
    follower.follow(now=10.0)
    assert control.requests[-1] == ("add", A, [NODE])


def test_a_model_loaded_again_within_the_grace_keeps_its_queue(child):
    control = Control()
    follower = _follower(child, control, grace_s=5.0)
    child.loaded = frozenset({"model-a"})
    follower.follow(now=0.0)
    child.loaded = frozenset()
    follower.follow(now=1.0)
    child.loaded = frozenset({"model-a"})
    follower.follow(now=2.0)
    child.loaded = frozenset()
    follower.follow(now=6.5)  # unloaded again at 6.5: its grace starts anew
    follower.follow(now=7.0)
    assert control.requests == [("add", A, [NODE])]
    follower.follow(now=11.5)
    assert control.requests == [("add", A, [NODE]), ("cancel", A, [NODE])]


def test_a_worker_with_several_children_keeps_consuming_an_unloaded_model_queue(child):
    control = Control()
    follower = _follower(child, control, cancels=False)
    child.loaded = frozenset({"model-a"})
    follower.follow(now=0.0)
    child.loaded = frozenset()
    follower.follow(now=100.0)
    assert control.requests == [("add", A, [NODE])]


def test_a_request_that_fails_is_asked_again_at_the_next_look(child):
    control = Control()
    follower = _follower(child, control)
    child.loaded = frozenset({"model-a"})
    control.fail = True
    with pytest.raises(ConnectionError):
        follower.follow(now=0.0)
    follower.follow(now=1.0)
    assert control.requests == [("add", A, [NODE])]


def test_a_model_loaded_and_unloaded_between_two_looks_has_its_queue_consumed_until_nothing_waits_there(child):
    # A heartbeat may have said the child held it, and routing sent a shard to its queue on that word
    control = Control()
    follower = _follower(child, control, consuming=frozenset({A}), grace_s=5.0)
    child.loaded = frozenset({"model-a"})
    follower.follow(now=0.0)
    child.loaded = frozenset({"model-b"})
    child.loaded = frozenset({"model-a"})  # model-b came and went before the next look
    child.depths = {B: 1}
    follower.follow(now=1.0)
    assert control.requests == [("add", B, [NODE])]
    follower.follow(now=7.0)
    assert control.requests == [("add", B, [NODE])]  # its shard still waits there: taken first
    child.depths = {}
    follower.follow(now=8.0)
    assert control.requests == [("add", B, [NODE]), ("cancel", B, [NODE])]
