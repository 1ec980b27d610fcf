"""Embedding heads: projector, Matryoshka truncation, normalization, per request."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from poolq.engine.pooling.methods import TokenStates
from poolq.engine.pooling.precision import through, to_host, widen
from poolq.engine.pooling.window_combiners import MeanVector
from poolq.engine.request import PoolingParams


def finish_vectors(vectors: torch.Tensor, params: PoolingParams, default_normalize: bool) -> torch.Tensor:
    """Matryoshka truncation, then normalization (if on), in float32: ``[..., dim] -> [..., dims]``."""
    if params.dimensions is not None:
        vectors = vectors[..., : params.dimensions]
    vectors = widen(vectors)
    normalize = default_normalize if params.normalize is None else params.normalize
    return F.normalize(vectors, p=2, dim=-1) if normalize else vectors


def project(states: torch.Tensor, projector: torch.nn.Module | None) -> torch.Tensor:
    """``states`` through the projector (in its dtype), if the model has one; float32 either way."""
    return widen(states) if projector is None else through(projector, states)


class EmbeddingHead:
    """Pooled ``[num_seqs, hidden]`` -> one vector per sequence (projector, dims, normalize)."""

    def __init__(self, projector: torch.nn.Module | None, normalize: bool) -> None:
        self.projector = projector
        self.normalize = normalize

    def forward(self, pooled: torch.Tensor, params: tuple[PoolingParams, ...]) -> list[np.ndarray]:
        vectors = project(pooled, self.projector)
        return [to_host(finish_vectors(row, p, self.normalize)) for row, p in zip(vectors, params)]

    def window_combiner(self, params: PoolingParams) -> MeanVector:
        return MeanVector(self.normalize if params.normalize is None else params.normalize)


class TokenEmbeddingHead:
    """Token states -> one vector per token (late interaction, e.g. MaxSim)."""

    def __init__(self, projector: torch.nn.Module | None, normalize: bool) -> None:
        self.projector = projector
        self.normalize = normalize

    def forward(self, states: TokenStates, params: tuple[PoolingParams, ...]) -> list[np.ndarray]:
        # tokens: [n, hidden]
        return [to_host(finish_vectors(project(tokens, self.projector), p, self.normalize)) for tokens, p in zip(states, params)]
