"""SPLADE: token states -> vocabulary weights ``log1p(relu(mlm_logits))``, reduced over tokens."""
from __future__ import annotations

import torch

from poolq.engine.pooling.host_block import sparse_to_host
from poolq.engine.pooling.methods import TokenStates
from poolq.engine.pooling.precision import WIDE, through
from poolq.engine.pooling.window_combiners import SparseReduce
from poolq.engine.request import PoolingParams, SparseVector

# Tokens per MLM-head call: bounds the [tokens, vocab] logits temporary (256 x 30k fp32 = 31 MB).
_BLOCK_TOKENS = 256


class SparseHead:
    """Every position of the sequence counts, the template's CLS/SEP too: SPLADE's definition
    (naver's ``max(log1p(relu(logits)) * attention_mask)``) and sentence-transformers'
    ``SparseEncoder``, so poolq's vectors are the ones those users index."""

    def __init__(self, mlm_head: torch.nn.Module, reduce: str) -> None:
        if reduce not in ("max", "sum"):
            raise ValueError(f"reduce must be 'max' or 'sum', got {reduce!r}")
        self.mlm_head = mlm_head
        self.reduce = reduce

    def forward(self, states: TokenStates, params: tuple[PoolingParams, ...]) -> list[SparseVector]:
        return sparse_to_host([self._one(tokens) for tokens in states])

    def window_combiner(self, params: PoolingParams) -> SparseReduce:
        return SparseReduce(self.reduce)

    def _one(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the ids of the sequence's nonzero vocabulary weights, those weights), on the device; tokens: [n, hidden]."""
        weights = None  # [vocab] float32
        for start in range(0, tokens.shape[0], _BLOCK_TOKENS):
            block = torch.log1p(torch.relu(through(self.mlm_head, tokens[start : start + _BLOCK_TOKENS])))
            reduced = block.amax(0) if self.reduce == "max" else block.sum(0)
            if weights is None:
                weights = reduced
            elif self.reduce == "max":
                torch.maximum(weights, reduced, out=weights)
            else:
                weights += reduced
        if weights is None:
            return torch.empty(0, dtype=torch.int32, device=tokens.device), torch.empty(0, dtype=WIDE, device=tokens.device)
        ids = torch.nonzero(weights).squeeze(1)
        return ids, weights[ids]
