"""A job's records that are written once and never change (its tenant, spec and plan), read at
most once per process for the jobs it serves lately."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, TypeVar

_T = TypeVar("_T")
_JOBS_KEPT = 256  # a worker serves a few jobs at a time; older jobs' records are read again if needed


class WrittenOnceCache(Generic[_T]):
    """job id -> one written-once record, the most recently used ``kept`` of them."""

    def __init__(self, kept: int = _JOBS_KEPT) -> None:
        self.kept = kept
        self._records: OrderedDict[str, _T] = OrderedDict()
        self._records_lock = threading.Lock()  # guards _records: shard tasks may run in threads

    def get(self, job_id: str, read: Callable[[], _T]) -> _T:
        """The record of ``job_id``, read with ``read`` unless this process has it already."""
        with self._records_lock:
            if job_id in self._records:
                self._records.move_to_end(job_id)
                return self._records[job_id]
        value = read()  # outside the lock: a slow read of one job never holds up another's
        with self._records_lock:
            self._records[job_id] = value
            while len(self._records) > self.kept:
                self._records.popitem(last=False)
        return value
