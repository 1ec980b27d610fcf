"""A pooler is one pooling method followed by one head."""
from __future__ import annotations

import torch

from .heads import EmbeddingHead
from .methods import PoolingMethod


class Pooler:
    def __init__(self, method: PoolingMethod, head: EmbeddingHead) -> None:
        self.method = method
        self.head = head

    def forward(self, hidden_states: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
        """[num_tokens, hidden] + [num_seqs + 1] offsets -> [num_seqs, dim] float32."""
        return self.head.forward(self.method.forward(hidden_states, cu_seqlens))
