"""A pooler is one pooling method followed by one head."""
from __future__ import annotations

from typing import Protocol, Sequence

import torch

from poolq.engine.pooling.metadata import PoolingMetadata
from poolq.engine.pooling.methods import PoolingMethod
from poolq.engine.request import PooledData, PoolingParams


class Head(Protocol):
    # Positional-only: heads name their first argument after what they take (pooled, states).
    def forward(self, pooled, params: tuple[PoolingParams, ...], /) -> Sequence[PooledData]: ...


class Pooler:
    def __init__(self, method: PoolingMethod, head: Head) -> None:
        self.method = method
        self.head = head

    @torch.inference_mode()
    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> Sequence[PooledData]:
        """``[num_tokens, hidden]`` -> one output per sequence in ``meta``."""
        return self.head.forward(self.method.forward(hidden_states, meta), meta.params)
