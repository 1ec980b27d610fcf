"""Whose turn it is on one engine: batch work goes step by step, and an urgent request (the
interactive lane) takes the engine between two of those steps, ahead of the next batch step."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class EngineTurns:
    """A gate around each forward step. Steps of urgent runs wait only for the step in progress;
    batch steps also wait while an urgent step is waiting."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running = False
        self._urgent_waiting = 0

    @property
    def urgent_waiting(self) -> int:
        """Urgent steps waiting for the engine now."""
        return self._urgent_waiting

    @contextmanager
    def step(self, urgent: bool = False) -> Iterator[None]:
        with self._changed:
            if urgent:
                self._urgent_waiting += 1
                try:
                    self._changed.wait_for(lambda: not self._running)
                finally:
                    self._urgent_waiting -= 1
            else:
                self._changed.wait_for(lambda: not self._running and not self._urgent_waiting)
            self._running = True
        try:
            yield
        finally:
            with self._changed:
                self._running = False
                self._changed.notify_all()
