"""BGE-M3's sparse and multi-vector heads (dense is an ordinary CLS embedding head).

* sparse: ``relu(sparse_linear(h_t))`` is token t's weight; a vocabulary id's weight is the max
  over the positions holding it; CLS, EOS, pad and unknown ids carry none.
* ColBERT: ``normalize(colbert_linear(h_t))`` for every token but the first (CLS); a request's
  ``dimensions`` and ``normalize`` finish the rows as every embedding head's (task_heads.finish_block).
"""
from __future__ import annotations

import numpy as np
import torch

from poolq.engine.pooling.heads.task_heads import Finishing, finish_block, finishing
from poolq.engine.pooling.host_block import sparse_to_host, tokens_to_host
from poolq.engine.pooling.metadata import PoolingMetadata
from poolq.engine.pooling.methods import PoolingMethod
from poolq.engine.pooling.precision import WIDE, through
from poolq.engine.pooling.window_combiners import SparseReduce
from poolq.engine.request import PoolingParams, SparseVector

TokensWithIds = list[tuple[torch.Tensor, torch.Tensor]]  # ([n_i, hidden], [n_i] token ids) per sequence


class AllTokensWithIds(PoolingMethod):
    """Every token's state with its token id (a weight per vocabulary id needs both)."""

    returns_tokens = True

    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> TokensWithIds:  # type: ignore[override]
        return [(hidden_states[start:end], meta.input_ids[start:end]) for start, end in meta.spans()]


class TokenWeightSparseHead:
    def __init__(self, sparse_linear: torch.nn.Linear, unused_token_ids: tuple[int, ...]) -> None:
        self.sparse_linear = sparse_linear
        self.unused_token_ids = unused_token_ids

    def forward(self, tokens: TokensWithIds, params: tuple[PoolingParams, ...]) -> list[SparseVector]:
        return sparse_to_host([self._one(states, ids) for states, ids in tokens])

    def _one(self, states: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the sequence's weighted vocabulary ids, their weights), on the device."""
        weights = torch.relu(through(self.sparse_linear, states)).squeeze(-1)  # [n] float32
        keep = (weights > 0) & ~torch.isin(ids, torch.tensor(self.unused_token_ids, device=ids.device))
        ids, weights = ids[keep], weights[keep]
        unique, inverse = torch.unique(ids, sorted=True, return_inverse=True)
        maxima = torch.zeros(len(unique), dtype=WIDE, device=weights.device)
        maxima.scatter_reduce_(0, inverse, weights, reduce="amax", include_self=False)
        return unique, maxima

    def window_combiner(self, params: PoolingParams) -> SparseReduce:
        return SparseReduce("max")


class ColbertHead:
    """``kept_tokens``: the rows of a sequence's tokens this head returns (all but the first)."""

    kept_tokens = slice(1, None)

    def __init__(self, colbert_linear: torch.nn.Linear) -> None:
        self.colbert_linear = colbert_linear

    def forward(self, states: list[torch.Tensor], params: tuple[PoolingParams, ...]) -> list[np.ndarray]:
        # [n_i - 1, dims] each; a group's kept tokens go through the linear as one block (BGE-M3 normalizes by default)
        keys = [finishing(p, True) for p in params]
        return tokens_to_host([tokens[self.kept_tokens] for tokens in states], keys, self._vectors)

    def _vectors(self, tokens: torch.Tensor, key: Finishing) -> torch.Tensor:
        return finish_block(through(self.colbert_linear, tokens), key)
