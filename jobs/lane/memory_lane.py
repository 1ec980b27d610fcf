"""The lane within one process: a queue of requests, each with a future for its reply.
For an API and its workers in one process (tests, in-process use)."""
from __future__ import annotations

import queue
import threading
import time
import uuid
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from poolq.jobs.lane.embedding_lane import EmbeddingLane, LaneTimeout, TakenRequest
from poolq.jobs.lane.lane_messages import EmbeddingReply, EmbeddingRequest


@dataclass
class _Sent:
    request_id: str
    request: EmbeddingRequest
    deadline: float  # time.monotonic()
    answer: Future[EmbeddingReply] = field(default_factory=Future)


class InMemoryEmbeddingLane(EmbeddingLane):
    def __init__(self) -> None:
        self._queue: queue.Queue[_Sent] = queue.Queue()
        self._waiting: dict[str, _Sent] = {}  # request id -> request, while its caller waits
        self._lock = threading.Lock()

    def call(self, request: EmbeddingRequest, timeout_s: float) -> EmbeddingReply:
        sent = _Sent(uuid.uuid4().hex, request, time.monotonic() + timeout_s)
        with self._lock:
            self._waiting[sent.request_id] = sent
        self._queue.put(sent)
        try:
            return sent.answer.result(timeout=timeout_s)
        except FutureTimeout:
            raise LaneTimeout(f"no worker answered within {timeout_s:g} s") from None
        finally:
            with self._lock:  # a late reply finds nobody waiting and is dropped
                self._waiting.pop(sent.request_id, None)

    def take(self, wait_s: float) -> TakenRequest | None:
        end = time.monotonic() + wait_s
        while True:
            try:
                sent = self._queue.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                return None
            taken = TakenRequest(sent.request_id, sent.request, sent.deadline)
            if not taken.expired:
                return taken

    def reply(self, taken: TakenRequest, reply: EmbeddingReply) -> None:
        with self._lock:
            sent = self._waiting.get(taken.request_id)
            if sent is not None and not sent.answer.done():
                sent.answer.set_result(reply)
