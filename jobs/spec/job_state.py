"""A job's states and every move between them, declared once."""
from __future__ import annotations

from enum import Enum


class JobState(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PARTIALLY_SUCCEEDED = "partially_succeeded"
    FAILED = "failed"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return not TRANSITIONS[self]

    def can_become(self, target: "JobState") -> bool:
        return target in TRANSITIONS[self]


# Every allowed move, declared once. Terminal states have none: they never change.
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.RUNNING, JobState.CANCELLING, JobState.FAILED}),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.PARTIALLY_SUCCEEDED, JobState.FAILED, JobState.CANCELLING}
    ),
    JobState.CANCELLING: frozenset({JobState.CANCELLED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.PARTIALLY_SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}
