"""Scores of text pairs from pooled outputs: pure array functions, no model and no torch.

Which of them a model can serve (and running it) is the engine's business: ``PoolingEngine.score``.
"""
from __future__ import annotations

import numpy as np


def cosine_scores(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[n]`` row-wise dot products of ``[n, dim]`` L2-normalized embeddings: their cosines."""
    return (a * b).sum(axis=1).astype(np.float32, copy=False)


def maxsim(query_tokens: np.ndarray, document_tokens: np.ndarray) -> float:
    """ColBERT's late interaction: each query token's best match in the document, summed."""
    return float((query_tokens @ document_tokens.T).max(axis=1).sum())


def maxsim_scores(queries: list[np.ndarray], documents: list[np.ndarray]) -> np.ndarray:
    """``[n]`` MaxSim of each ``[q_tokens, dim]`` query against its ``[d_tokens, dim]`` document."""
    return np.array([maxsim(q, d) for q, d in zip(queries, documents)], dtype=np.float32)
