"""sparse_embed (SPLADE): vocabulary ids and weights per document (or chunk), optionally pruned."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from poolq.engine import ModelSpec, PooledData, PoolingOutput, PoolingTask, SparseVector
from poolq.jobs.tasks.job_task import JobTask, RowSource
from poolq.jobs.tasks.rows import SparseRows, sparse_schema
from poolq.storage import RowColumns

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine


class SparseTask(JobTask):
    name = "sparse_embed"
    summary = "SPLADE term weights, token id to weight"
    pooling_task = PoolingTask.SPARSE_EMBED
    output_options = frozenset({"sparse_top_k", "sparse_min_weight"})

    def rows(self, engine: "PoolingEngine") -> SparseRows:
        return SparseRows(with_chunks=self.chunk_rows)

    def append_value(self, rows: RowColumns, value: PooledData, result: PoolingOutput, source: RowSource) -> None:
        if not isinstance(rows, SparseRows) or not isinstance(value, SparseVector):
            raise TypeError("sparse_embed rows and vectors expected")
        indices, weights = prune(value, self.spec.output.sparse_top_k, self.spec.output.sparse_min_weight)
        rows.append(source.record_id, indices, weights, result.num_tokens, result.truncated, source.chunk,
                    content_hash=source.content_hash, split=source.split)

    def schema(self, model_spec: ModelSpec, dimensions: int | None) -> pa.Schema:
        return sparse_schema(self.chunk_rows)


def prune(vector: SparseVector, top_k: int | None, min_weight: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Weights at least ``min_weight``, then the ``top_k`` largest (ties: the lower id); ids ascending."""
    indices, weights = vector.token_ids, vector.weights
    if min_weight is not None:
        kept = weights >= min_weight
        indices, weights = indices[kept], weights[kept]
    if top_k is not None and len(indices) > top_k:
        order = np.lexsort((indices, -weights))[:top_k]  # by weight descending, then id ascending
        order.sort()  # back to ascending ids (indices are ascending, so positions are too)
        indices, weights = indices[order], weights[order]
    return indices, weights
