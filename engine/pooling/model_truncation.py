"""A model's default Matryoshka size (sentence-transformers' ``truncate_dim``), cut as its ``encode`` cuts.

A model saved with ``truncate_dim`` (in ``config_sentence_transformers.json``) has ``encode`` cut each
sentence embedding to that size after every module ran, its Normalize included, without normalizing the
cut vector again (only ``normalize_embeddings=True`` does that). So the cut is made here, on a request's
finished output (a text's vector, each chunk row, a chunked document's combined vector), and only when
the request names no ``dimensions``: a request's own ``dimensions`` cut before normalization
(``heads.task_heads.finish_block``), the contract of a job's ``output.dimensions``, and may ask up to the full size.
Token embeddings are not cut (sentence-transformers cuts the sentence embedding only).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from poolq.engine.request import EngineResult, MultiOutput, PoolingRequest, PoolingTask, RequestError

_EPS = np.float32(1e-12)  # torch.nn.functional.normalize's


def cut_to_model_size(result: EngineResult, request: PoolingRequest, truncate_dim: int | None) -> EngineResult:
    """``result`` with its embed vectors cut to ``truncate_dim`` when ``request`` names no dimensions."""
    if truncate_dim is None or request.params.dimensions is not None or isinstance(result, RequestError):
        return result
    if PoolingTask.EMBED not in request.all_tasks:
        return result
    normalize = request.params.normalize is True  # sentence-transformers' normalize_embeddings=True
    data = result.data
    if isinstance(data, MultiOutput):
        embed = data.outputs[PoolingTask.EMBED]
        if not isinstance(embed, np.ndarray):
            raise TypeError("an embed output that is not a dense vector")
        return replace(result, data=MultiOutput({**data.outputs, PoolingTask.EMBED: _cut(embed, truncate_dim, normalize)}))
    if not isinstance(data, np.ndarray):
        raise TypeError("an embed output that is not a dense vector")
    return replace(result, data=_cut(data, truncate_dim, normalize))


def _cut(vectors: np.ndarray, truncate_dim: int, normalize: bool) -> np.ndarray:
    """``[..., dim] -> [..., truncate_dim]`` (one vector, or one per chunk row), normalized again if asked."""
    kept = np.ascontiguousarray(vectors[..., :truncate_dim], dtype=np.float32)
    if normalize:
        kept /= np.maximum(np.linalg.norm(kept, axis=-1, keepdims=True), _EPS)
    return kept
