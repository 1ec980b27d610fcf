"""The largest growth of this process' RSS while a block runs: what one call holds at its peak
(activations, padded batches, attention masks), which its start and end values would miss."""
from __future__ import annotations

import os
import threading


class RssPeak:
    """``with RssPeak() as rss: ...``; then ``rss.peak_mb``: the largest RSS over its value at entry, in MiB,
    sampled every ``interval_s`` by a thread."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.peak_mb = 0.0

    def _rss(self) -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * self._page

    def _sample(self, start: int) -> None:
        while not self._stop.wait(self._interval_s):
            self.peak_mb = max(self.peak_mb, (self._rss() - start) / 2**20)

    def __enter__(self) -> "RssPeak":
        self._thread = threading.Thread(target=self._sample, args=(self._rss(),), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
