"""The lane's contract: the API side submits a request and waits for its reply until a deadline;
the worker side takes requests (never one whose deadline has passed) and replies to them."""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from poolq.jobs.lane.lane_messages import EmbeddingReply, EmbeddingRequest


class LaneTimeout(Exception):
    """No worker replied before the request's deadline (none is running, or all were busy or died)."""


@dataclass(frozen=True)
class TakenRequest:
    """A request a worker took: its id (to reply to) and its deadline on this process's clock."""

    request_id: str
    request: EmbeddingRequest
    deadline: float  # time.monotonic(): past it, nobody waits for the reply

    @property
    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def expired(self) -> bool:
        return self.remaining_s <= 0


class EmbeddingLane(ABC):
    """Requests go to whichever worker takes them first, in the order they were sent."""

    @abstractmethod
    def call(self, request: EmbeddingRequest, timeout_s: float) -> EmbeddingReply:
        """API side: send ``request`` and wait for its reply; :class:`LaneTimeout` after ``timeout_s``.
        A request not taken by then is dropped: no worker will run it."""

    @abstractmethod
    def take(self, wait_s: float) -> TakenRequest | None:
        """Worker side: the oldest request whose deadline is ahead, waiting up to ``wait_s`` for one;
        None if none came. Requests found past their deadline are dropped on the way."""

    @abstractmethod
    def reply(self, taken: TakenRequest, reply: EmbeddingReply) -> None:
        """Worker side: answer ``taken``. A reply nobody waits for any more expires unread."""
