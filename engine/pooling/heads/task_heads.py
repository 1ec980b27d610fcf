"""Embedding heads: projector, Matryoshka truncation, normalization, per request."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from poolq.engine.pooling.host_block import rows_to_host, tokens_to_host
from poolq.engine.pooling.methods import TokenStates
from poolq.engine.pooling.precision import through, widen
from poolq.engine.pooling.window_combiners import MeanVector
from poolq.engine.request import PoolingParams

Finishing = tuple[int | None, bool]  # (dimensions, normalize): what changes the math of a request's vectors


def finishing(params: PoolingParams, default_normalize: bool) -> Finishing:
    """The key rows are grouped by: requests with equal keys are finished as one block."""
    return params.dimensions, default_normalize if params.normalize is None else params.normalize


def finish_block(vectors: torch.Tensor, key: Finishing) -> torch.Tensor:
    """Matryoshka truncation, then normalization (if on), in float32: ``[..., dim] -> [..., dims]``."""
    dimensions, normalize = key
    if dimensions is not None:
        vectors = vectors[..., :dimensions]
    vectors = widen(vectors)
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
        vectors = project(pooled, self.projector)  # [num_seqs, dim] float32
        return rows_to_host(vectors, [finishing(p, self.normalize) for p in params], finish_block)

    def window_combiner(self, params: PoolingParams) -> MeanVector:
        return MeanVector(self.normalize if params.normalize is None else params.normalize)


class TokenEmbeddingHead:
    """Token states -> one vector per token (late interaction, e.g. MaxSim)."""

    def __init__(self, projector: torch.nn.Module | None, normalize: bool) -> None:
        self.projector = projector
        self.normalize = normalize

    def forward(self, states: TokenStates, params: tuple[PoolingParams, ...]) -> list[np.ndarray]:
        # states: [n_i, hidden] each; a group's tokens go through the projector as one block
        keys = [finishing(p, self.normalize) for p in params]
        return tokens_to_host(states, keys, lambda tokens, key: finish_block(project(tokens, self.projector), key))
