"""How ``chunked`` mode folds a document's windows into one output, per task.

Each window is pooled like a document of its own; the combiner folds the window outputs as
batches finish (a bounded accumulator: a long document never holds all its windows' outputs).
``pool_params`` are the params the windows are pooled with, when they differ from the request's.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

import numpy as np
import torch

from poolq.engine.pooling.precision import to_host
from poolq.engine.request import PooledData, PoolingParams, SparseVector


class WindowCombiner(ABC):
    pool_params: PoolingParams | None = None

    @abstractmethod
    def add(self, value: PooledData, weight: int) -> None:
        """Fold one window's pooled output; ``weight`` is its token count."""

    @abstractmethod
    def result(self) -> PooledData: ...


class _WeightedMean(WindowCombiner):
    def __init__(self) -> None:
        self._sum: np.ndarray | None = None  # [dim]: float32, the accumulation dtype (precision.py)
        self._weight = 0

    def add(self, value: PooledData, weight: int) -> None:
        if not isinstance(value, np.ndarray):
            raise TypeError("a dense window combiner was given a sparse vector")
        if self._sum is None:
            self._sum = np.zeros(value.shape, dtype=np.float32)
        self._sum += value * np.float32(weight)
        self._weight += weight

    def mean(self) -> np.ndarray:
        if self._sum is None:
            raise RuntimeError("a chunked document's output was asked for before any window's result was added")
        return self._sum / np.float32(self._weight)


class MeanVector(_WeightedMean):
    """embed (vLLM's chunked processing): token-weighted mean of the window vectors, normalized
    again (the mean of unit vectors is shorter than 1 and would skew dot-product ranking)."""

    def __init__(self, normalize: bool) -> None:
        super().__init__()
        self.normalize = normalize

    def result(self) -> np.ndarray:
        vector = self.mean()
        return vector / np.linalg.norm(vector) if self.normalize else vector


class MeanLogits(_WeightedMean):
    """classify: token-weighted mean of the windows' logits, then the model's activation (the
    mean of probabilities would not be what the activation makes of the evidence)."""

    def __init__(self, params: PoolingParams, activation: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.pool_params = PoolingParams(activation=False, returned_token_ids=params.returned_token_ids)
        self.activate = params.activation
        self.activation = activation

    def result(self) -> np.ndarray:
        logits = self.mean()
        if not self.activate:
            return logits
        return to_host(self.activation(torch.from_numpy(logits)))


class SparseReduce(WindowCombiner):
    """sparse_embed: SPLADE reduces over tokens by max (or sum), so the document's vector is that
    reduction over its windows' vectors (each window's special tokens count, as a window's would)."""

    def __init__(self, reduce: str) -> None:
        if reduce not in ("max", "sum"):
            raise ValueError(f"reduce must be 'max' or 'sum', got {reduce!r}")
        self.reduce = reduce
        self._weights: dict[int, float] = {}

    def add(self, value: PooledData, weight: int) -> None:
        if not isinstance(value, SparseVector):
            raise TypeError("the sparse window combiner was given a dense vector")
        held = self._weights
        for token_id, token_weight in zip(value.token_ids.tolist(), value.weights.tolist()):
            earlier = held.get(token_id)
            if earlier is None:
                held[token_id] = token_weight
            else:
                held[token_id] = max(earlier, token_weight) if self.reduce == "max" else earlier + token_weight

    def result(self) -> SparseVector:
        ids = np.array(sorted(self._weights), dtype=np.int32)
        return SparseVector(ids, np.array([self._weights[i] for i in ids.tolist()], dtype=np.float32))
