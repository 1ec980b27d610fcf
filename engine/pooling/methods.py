"""Pooling methods over the flat token layout: hidden states [num_tokens, hidden] + cu_seqlens."""
from __future__ import annotations

import torch

from ..model_spec import PoolingType


class PoolingMethod:
    """Reduces each sequence's token states to one vector: [num_tokens, hidden] -> [num_seqs, hidden]."""

    def forward(self, hidden_states: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class CLSPool(PoolingMethod):
    def forward(self, hidden_states: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
        return hidden_states[cu_seqlens[:-1].long()].float()


class LastPool(PoolingMethod):
    def forward(self, hidden_states: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
        return hidden_states[cu_seqlens[1:].long() - 1].float()


class MeanPool(PoolingMethod):
    """Segment means, summed in fp32 whatever the model's dtype."""

    def forward(self, hidden_states: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
        seq_lens = (cu_seqlens[1:] - cu_seqlens[:-1]).long()  # [num_seqs]
        segment_ids = torch.repeat_interleave(torch.arange(len(seq_lens), device=seq_lens.device), seq_lens)
        sums = torch.zeros(len(seq_lens), hidden_states.shape[1], dtype=torch.float32, device=hidden_states.device)
        sums.index_add_(0, segment_ids, hidden_states.float())  # [num_seqs, hidden]
        return sums / seq_lens.clamp(min=1).unsqueeze(1).float()


_METHODS: dict[PoolingType, type[PoolingMethod]] = {
    PoolingType.CLS: CLSPool,
    PoolingType.LAST: LastPool,
    PoolingType.MEAN: MeanPool,
}


def pooling_method(pooling: PoolingType) -> PoolingMethod:
    """The method for a pooling type; every PoolingType has one."""
    return _METHODS[pooling]()
