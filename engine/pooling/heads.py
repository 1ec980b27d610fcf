"""Embedding heads: projector, Matryoshka truncation, normalization, per request."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from poolq.engine.pooling.methods import TokenStates
from poolq.engine.pooling.window_combiners import MeanVector
from poolq.engine.request import PoolingParams


def finish_vectors(vectors: torch.Tensor, params: PoolingParams, default_normalize: bool) -> torch.Tensor:
    """Matryoshka truncation, then normalization (if on): ``[..., dim] -> [..., dims]``."""
    if params.dimensions is not None:
        vectors = vectors[..., : params.dimensions]
    normalize = default_normalize if params.normalize is None else params.normalize
    return F.normalize(vectors, p=2, dim=-1) if normalize else vectors


class EmbeddingHead:
    """Pooled ``[num_seqs, hidden]`` -> one vector per sequence (projector, dims, normalize)."""

    def __init__(self, projector: torch.nn.Module | None, normalize: bool) -> None:
        self.projector = projector
        self.normalize = normalize

    def forward(self, pooled: torch.Tensor, params: tuple[PoolingParams, ...]) -> list[np.ndarray]:
        if self.projector is not None:
            pooled = self.projector(_like_weights(pooled, self.projector)).float()
        return [finish_vectors(row, p, self.normalize).cpu().numpy() for row, p in zip(pooled, params)]

    def window_combiner(self, params: PoolingParams) -> MeanVector:
        return MeanVector(self.normalize if params.normalize is None else params.normalize)


class TokenEmbeddingHead:
    """Token states -> one vector per token (late interaction, e.g. MaxSim)."""

    def __init__(self, projector: torch.nn.Module | None, normalize: bool) -> None:
        self.projector = projector
        self.normalize = normalize

    def forward(self, states: TokenStates, params: tuple[PoolingParams, ...]) -> list[np.ndarray]:
        out = []
        for tokens, p in zip(states, params):  # tokens: [n, hidden]
            if self.projector is not None:
                tokens = self.projector(_like_weights(tokens, self.projector))
            out.append(finish_vectors(tokens.float(), p, self.normalize).cpu().numpy())
        return out


def _like_weights(x: torch.Tensor, module: torch.nn.Module) -> torch.Tensor:
    """``x`` on the module's device and in its dtype."""
    weight = next(module.parameters())
    return x.to(device=weight.device, dtype=weight.dtype)
