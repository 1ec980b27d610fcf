"""A pooler is one pooling method followed by one head."""
from __future__ import annotations

from typing import Protocol

import torch

from ..request import PooledData, PoolingParams
from .metadata import PoolingMetadata
from .methods import PoolingMethod


class Head(Protocol):
    def forward(self, pooled, params: tuple[PoolingParams, ...]) -> list[PooledData]: ...


class Pooler:
    def __init__(self, method: PoolingMethod, head: Head) -> None:
        self.method = method
        self.head = head

    @torch.inference_mode()
    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> list[PooledData]:
        """``[num_tokens, hidden]`` -> one output per sequence in ``meta``."""
        return self.head.forward(self.method.forward(hidden_states, meta), meta.params)
