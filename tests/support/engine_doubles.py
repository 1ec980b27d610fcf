"""Engines for jobs-layer tests: the real engine, noting what it is asked to embed; or its spec and
identity with constant vectors, where the model is not what a test is about."""
from __future__ import annotations

import numpy as np

from poolq.engine import PoolingOutput


class CountingEngine:
    """The real engine, noting the key of every document it is asked to embed."""

    def __init__(self, engine) -> None:
        self._engine = engine
        self.keys: list[str] = []

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def run(self, requests, policy, **options):
        def tap():
            for request in requests:
                self.keys.append(request.key)
                yield request

        return self._engine.run(tap(), policy, **options)


class ConstantVectorEngine(CountingEngine):
    """The engine's identity and spec (what incremental runs compare), one constant unit vector
    for every document, and the same note of what it was asked to embed."""

    def run(self, requests, policy, **options):
        vector = np.full(self._engine.dimensions, 1 / np.sqrt(self._engine.dimensions), dtype=np.float32)
        for request in requests:
            self.keys.append(request.key)
            yield PoolingOutput(request.key, vector, num_tokens=5, truncated=False, processed_tokens=5)
