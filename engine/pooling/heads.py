"""Heads applied to pooled vectors."""
from __future__ import annotations

import torch
import torch.nn.functional as F


class EmbeddingHead:
    """Optional L2 normalization of pooled embeddings (in fp32)."""

    def __init__(self, normalize: bool) -> None:
        self.normalize = normalize

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:  # [num_seqs, hidden] -> same
        return F.normalize(pooled, p=2, dim=-1) if self.normalize else pooled
