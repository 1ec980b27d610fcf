"""A compute worker process says it is alive every few seconds (``WorkerRegistry``): fair share
hands out as many shards at a time as there are such workers. A worker that just started also
hands out the shards waiting for it, instead of leaving them to the next commit or reconcile.
With each beat it reports its engines (``WorkerModelStats``: loaded now, loads, evictions, load
seconds, resident bytes) for ``GET /v1/models``, model-affinity routing and ``/metrics``."""
from __future__ import annotations

import logging
import threading
from dataclasses import asdict
from typing import Callable

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.worker_model_stats import UNKNOWN_DTYPE, WorkerModelStats
from poolq.jobs.coordination.worker_registry import this_worker
from poolq.jobs.engine_pool import EnginePool
from poolq.jobs.spec.engine_identity import device_kind
from poolq.jobs.steps.dispatch import dispatch_waiting

log = logging.getLogger(__name__)

MISSED_BEATS = 3  # a worker silent for this many beats is counted gone


class ComputePresence:
    """A daemon thread: a heartbeat now, then every ``worker_heartbeat_s``."""

    def __init__(self, context: Callable[[], JobContext], name: str | None = None) -> None:
        self.context = context
        self.name = name or this_worker()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="poolq-compute-presence", daemon=True)

    def start(self) -> "ComputePresence":
        self._thread.start()
        return self

    def stop(self) -> None:
        """The worker stops: it leaves the count at once (a killed one drops out after its beats)."""
        self._stopped.set()
        try:
            self.context().workers.forget(self.name)
        except Exception as exc:  # noqa: BLE001 - it drops out anyway once its word runs out
            log.debug("compute worker %s not forgotten: %s", self.name, exc)

    def _beat(self) -> None:
        while not self._stopped.is_set():
            try:
                ctx = self.context()
                interval = ctx.settings.sharding.worker_heartbeat_s
                if ctx.workers.heartbeat(self.name, interval * MISSED_BEATS):
                    log.info("compute worker %s is alive; %d shards handed out", self.name, len(dispatch_waiting(ctx)))
                ctx.workers.report_models(self.name, engine_report(ctx.engines), interval * MISSED_BEATS)
            except Exception as exc:  # noqa: BLE001 - a broker outage: the next beat tries again
                log.warning("compute worker %s could not say it is alive: %s", self.name, exc)
                interval = 1.0
            self._stopped.wait(interval)


def engine_report(engines: EnginePool) -> tuple[WorkerModelStats, ...]:
    """What a beat says of ``engines``: each engine the pool loaded, plus each one handed to it
    (``EnginePool.use``: loaded, with nothing counted), so that every model it holds is reported held."""
    device = device_kind(engines.config.device)
    stats = tuple(WorkerModelStats(**asdict(engine), device=device) for engine in engines.stats())
    counted = {engine.model for engine in stats if engine.loaded}
    handed_in = tuple(WorkerModelStats(model, UNKNOWN_DTYPE, 0, 0, 0.0, 0, loaded=True, device=device)
                      for model in sorted(engines.loaded - counted))
    return stats + handed_in
