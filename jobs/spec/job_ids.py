"""Job ids: 32 hex digits that sort by creation time; anything else never reaches the store as a key."""
from __future__ import annotations

import re
import secrets
import threading
import time

_JOB_ID = re.compile(r"^[0-9a-f]{32}$")


class _MonotonicIds:
    """Ids that strictly increase within a process, as ULID's monotonic generator makes them: in
    the same millisecond as the previous id (or after the clock stepped back) the previous random
    part plus one. Without it two ids of one millisecond sorted at random, and a listing "newest
    first" could put them the wrong way round. Across processes ids of one millisecond still sort
    by chance."""

    _RANDOM_BITS = 80

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = (0, 0)  # (milliseconds, random part) of the latest id

    def next(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            last_ms, last_random = self._last
            if ms > last_ms:
                random = secrets.randbits(self._RANDOM_BITS - 1)  # half the range left to count up in
            elif last_random + 1 < 1 << self._RANDOM_BITS:
                ms, random = last_ms, last_random + 1
            else:  # 2**79 ids in one millisecond: borrow the next one
                ms, random = last_ms + 1, secrets.randbits(self._RANDOM_BITS - 1)
            self._last = (ms, random)
        return f"{ms:012x}{random:020x}"


_job_ids = _MonotonicIds()


def new_job_id() -> str:
    """32 hex digits: milliseconds since the epoch (12), then 80 bits, random at each new
    millisecond; strictly increasing within a process, so ids sort by creation."""
    return _job_ids.next()


def is_job_id(value: str) -> bool:
    """Job ids are 32 lowercase hex digits; anything else never reaches the store as a key."""
    return bool(_JOB_ID.match(value))


class JobNotFound(LookupError):
    """No such job (or not one the caller may see)."""
