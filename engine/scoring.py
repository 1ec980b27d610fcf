"""Scores of text pairs from pooled outputs: pure array functions, no model and no torch.

Which of them a model serves follows from its declarations (``score_modes``, no weights needed);
running them is the engine's business: ``PoolingEngine.score``.
"""
from __future__ import annotations

import numpy as np

from poolq.engine.model_spec import ModelSpec
from poolq.engine.request import PoolingTask

# Each pair-scoring mode and the task it pools with, in order of preference.
SCORE_MODE_TASKS = {
    "cross_encoder": PoolingTask.CLASSIFY,  # a 1-label classifier on the pair, with token type ids
    "cosine": PoolingTask.EMBED,  # of the two texts' normalized embeddings
    "maxsim": PoolingTask.TOKEN_EMBED,  # late interaction over normalized token embeddings
}


def score_modes(spec: ModelSpec) -> list[str]:
    """The pair-scoring modes ``spec``'s model serves, preferred first."""
    tasks = spec.kind.tasks
    return [mode for mode, task in SCORE_MODE_TASKS.items()
            if task in tasks and (mode != "cross_encoder" or spec.num_labels == 1)]


def cosine_scores(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[n]`` row-wise dot products of ``[n, dim]`` L2-normalized embeddings: their cosines."""
    return (a * b).sum(axis=1).astype(np.float32, copy=False)


def maxsim(query_tokens: np.ndarray, document_tokens: np.ndarray) -> float:
    """ColBERT's late interaction: each query token's best match in the document, summed."""
    return float((query_tokens @ document_tokens.T).max(axis=1).sum())


def maxsim_scores(queries: list[np.ndarray], documents: list[np.ndarray]) -> np.ndarray:
    """``[n]`` MaxSim of each ``[q_tokens, dim]`` query against its ``[d_tokens, dim]`` document."""
    return np.array([maxsim(q, d) for q, d in zip(queries, documents)], dtype=np.float32)
