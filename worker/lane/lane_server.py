"""The lane's worker side in one process: a daemon thread that takes requests one at a time and
answers them with the process's engines (the EnginePool its shard tasks use, so a model is loaded
once and a lane request takes the engine between two steps of a running shard)."""
from __future__ import annotations

import logging
import threading
from typing import Callable

from poolq.jobs.engine_pool import EnginePool
from poolq.jobs.lane.embedding_lane import EmbeddingLane
from poolq.jobs.lane.lane_embedder import embed_taken

log = logging.getLogger(__name__)

POLL_S = 1.0  # how long one wait for a request lasts: how soon a stop is noticed when idle
RETRY_S = 1.0  # after the lane failed (Redis away), wait this long before trying again


class LaneServer:
    """Serves ``lane`` from a daemon thread until :meth:`stop`. ``engines`` is called for each request
    (a worker builds its context lazily, after fork)."""

    def __init__(self, lane: EmbeddingLane, engines: Callable[[], EnginePool], *, poll_s: float = POLL_S,
                 retry_s: float = RETRY_S) -> None:
        self.lane = lane
        self._engines = engines
        self._poll_s, self._retry_s = poll_s, retry_s
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "LaneServer":
        self._thread = threading.Thread(target=self._serve, name="poolq-lane", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float | None = None) -> None:
        """Take no more requests; wait up to ``timeout_s`` for the one being answered."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def serve_one(self, wait_s: float) -> bool:
        """Take one request (waiting up to ``wait_s``) and answer it; False if none came."""
        taken = self.lane.take(wait_s)
        if taken is None:
            return False
        reply = embed_taken(self._engines, taken)
        if reply is not None:
            self.lane.reply(taken, reply)
        return True

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                self.serve_one(self._poll_s)
            except Exception:  # noqa: BLE001 - the lane itself failed (Redis away): try again shortly
                log.warning("the interactive lane failed; retrying in %g s", self._retry_s, exc_info=True)
                self._stopping.wait(self._retry_s)

    def __enter__(self) -> "LaneServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
