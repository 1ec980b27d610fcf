"""Scoring text pairs: cross-encoder, bi-encoder cosine, or late-interaction MaxSim."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .request import PoolingParams, PoolingTask

if TYPE_CHECKING:
    from .engine import PoolingEngine

SCORE_MODES = ("cross_encoder", "cosine", "maxsim")


def score_pairs(engine: "PoolingEngine", texts_a: list[str], texts_b: list[str], mode: str) -> np.ndarray:
    """``[n]`` scores of ``texts_a[i]`` against ``texts_b[i]``."""
    if len(texts_a) != len(texts_b):
        raise ValueError(f"score needs as many first texts as second texts ({len(texts_a)} != {len(texts_b)})")
    mode = _resolve_mode(engine, mode)
    if mode == "cross_encoder":
        return engine.classify(texts_a, text_pairs=texts_b)[:, 0]
    if mode == "cosine":
        a = engine.embed(texts_a, normalize=True)
        b = engine.embed(texts_b, normalize=True)
        return (a * b).sum(axis=1)
    queries = engine.encode(texts_a, PoolingTask.TOKEN_EMBED, PoolingParams(normalize=True))
    documents = engine.encode(texts_b, PoolingTask.TOKEN_EMBED, PoolingParams(normalize=True))
    return np.array([maxsim(q, d) for q, d in zip(queries, documents)], dtype=np.float32)


def maxsim(query_tokens: np.ndarray, document_tokens: np.ndarray) -> float:
    """ColBERT's late interaction: each query token's best match in the document, summed."""
    return float((query_tokens @ document_tokens.T).max(axis=1).sum())


def _resolve_mode(engine: "PoolingEngine", mode: str) -> str:
    tasks = engine.supported_tasks
    available = []
    if PoolingTask.CLASSIFY in tasks and engine.spec.num_labels == 1:
        available.append("cross_encoder")
    if PoolingTask.EMBED in tasks:
        available.append("cosine")
    if PoolingTask.TOKEN_EMBED in tasks:
        available.append("maxsim")
    if mode == "auto" and available:
        return available[0]
    if mode not in available:
        raise ValueError(f"score mode {mode!r} is not available for this model; available: {', '.join(available) or 'none'}")
    return mode
