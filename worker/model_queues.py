"""A compute worker consumes the general ``gpu`` queue and the queue of each model its pool children
hold loaded (model affinity: ``steps/shard_routing.py`` sends a shard there while a holder
can take it soon).

Its warm models' queues are in its queue list from the start (each pool child loads them as it
starts, ``model_warmup``). A pool child that loads another model later (a shard of it came through
the general queue, or a lane request asked for it) asks its own Celery worker to consume that
model's queue as well: a remote-control ``add_consumer`` addressed to this worker's node name
alone, which the worker handles in its event loop (on Redis a PUBLISH; nothing waits for a reply).
When the child unloads the model again (``EnginePool``'s memory bound), it asks the worker to stop
consuming that queue (``cancel_consumer``) once no task waits there and the unload is older than a
heartbeat (routing, which reads what each worker last reported, no longer counts it a holder): a
task that waits there is taken first, and loads the model again. This only in a worker with one
pool child; one with several keeps consuming, as a sibling may still hold the model. Both are
harmless: a child that takes a shard of a model it does not hold loads the model, as it would for
a shard from the general queue, and routing never lets more tasks wait in a model's queue than live
workers hold the model. A queue whose model's last holder died keeps its waiting tasks until some
worker consumes it again; the reconciler sends those shards again (``steps/lost_units.py``), and a
late delivery of the old task is a no-op (the shard's commit marker).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable, Protocol

from poolq.jobs.coordination.enqueuer import model_queue
from poolq.jobs.engine_pool import EngineStats

log = logging.getLogger(__name__)

FOLLOW_INTERVAL_S = 1.0  # how often a pool child compares the models it holds with the queues asked for


class WorkerControl(Protocol):
    """What this needs of ``celery.app.control.Control``."""

    def add_consumer(self, queue: str, *, destination: list[str]) -> object: ...

    def cancel_consumer(self, queue: str, *, destination: list[str]) -> object: ...


class HeldModels(Protocol):
    """What this needs of the pool child's ``EnginePool``."""

    @property
    def loaded(self) -> frozenset[str]: ...

    def stats(self) -> Iterable[EngineStats]: ...


class ModelQueues:
    """One pool child's view: the worker ``node`` consumes the queues of the models ``engines()`` holds.

    ``consuming``: the model queues the worker consumes as far as this child knows (its warm models'
    at start); ``waiting(queue)``: tasks waiting in a queue; ``cancels``: whether an unloaded model's
    queue is given up (the worker's only child), ``grace_s`` after the unload was seen at the earliest."""

    def __init__(self, control: WorkerControl, node: str, engines: Callable[[], HeldModels],
                 waiting: Callable[[str], int | None], consuming: frozenset[str] = frozenset(), *,
                 cancels: bool = True, grace_s: float = 0.0) -> None:
        self.control = control
        self.node = node
        self.engines = engines
        self.waiting = waiting
        self.cancels = cancels
        self.grace_s = grace_s
        self.consuming = set(consuming)
        self._held: set[str] = set()  # the queues of the models this child held at the last look
        self._loads: dict[tuple[str, str], int] = {}  # (model, dtype) -> its loads at the last look
        self._unloaded: dict[str, float] = {}  # queue -> when its model was seen unloaded (not given up yet)
        self._stopped = threading.Event()

    def follow(self, now: float | None = None) -> None:
        """Ask the worker to consume the queue of each model held now or loaded since the last look,
        and (``cancels``) to stop consuming those of models no longer held, once that is safe. A
        failed request is asked again at the next look.

        A model loaded and unloaded again between two looks counts too: a heartbeat may have said
        the child held it, and routing may have sent its shards to its queue on that word."""
        now = time.monotonic() if now is None else now
        engines = self.engines()
        loads = {(stats.model, stats.dtype): stats.loads for stats in engines.stats()}
        held = {model_queue(model) for model in engines.loaded}
        loaded_since = {model for (model, dtype), count in loads.items() if count > self._loads.get((model, dtype), 0)}
        seen = held | {model_queue(model) for model in loaded_since}
        for queue in sorted(seen - self.consuming):
            self.control.add_consumer(queue, destination=[self.node])
            self.consuming.add(queue)
            log.info("worker %s consumes %s: a model it holds now", self.node, queue)
        if self.cancels:
            self._give_up_unloaded((self._held | seen) - held, held, now)
        self._held, self._loads = held, loads

    def _give_up_unloaded(self, unloaded: set[str], held: set[str], now: float) -> None:
        for queue in unloaded:
            self._unloaded.setdefault(queue, now)
        for queue, since in sorted(self._unloaded.items()):
            if queue in held or queue not in self.consuming:  # loaded again, or not consumed
                del self._unloaded[queue]
            elif now - since >= self.grace_s and self.waiting(queue) == 0:
                self.control.cancel_consumer(queue, destination=[self.node])
                self.consuming.discard(queue)
                del self._unloaded[queue]
                log.info("worker %s stops consuming %s: its model was unloaded", self.node, queue)

    def start(self) -> "ModelQueues":
        threading.Thread(target=self._run, name="poolq-model-queues", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(FOLLOW_INTERVAL_S):
            try:
                self.follow()
            except Exception as exc:  # noqa: BLE001 - a broker outage: the next look asks again
                log.warning("worker %s: following its models' queues failed: %s", self.node, exc)
