"""The sparse_embed task's Parquet format: ``sparse_indices`` (vocabulary ids, ascending) and
``sparse_values`` (their weights), the layout Qdrant, Pinecone and Milvus import sparse vectors
in, beside the common columns (``row_columns.py``)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from poolq.storage.row_columns import ChunkValues, RowColumns, list_array, part_schema

SPARSE_FIELDS = [
    pa.field("sparse_indices", pa.list_(pa.int32()), nullable=False),
    pa.field("sparse_values", pa.list_(pa.float32()), nullable=False),
]


def sparse_schema(with_chunks: bool = False) -> pa.Schema:
    return part_schema(SPARSE_FIELDS, with_chunks)


@dataclass
class SparseRows(RowColumns):
    indices: list[np.ndarray] = field(default_factory=list, repr=False)  # [nnz] int32 each
    values: list[np.ndarray] = field(default_factory=list, repr=False)  # [nnz] float32 each

    def append(self, record_id: str, indices: np.ndarray, values: np.ndarray, num_tokens: int, truncated: bool,
               chunk: ChunkValues | None = None, content_hash: str | None = None, split: bool = False) -> None:
        if indices.shape != values.shape or indices.ndim != 1:
            raise ValueError(f"record {record_id!r}: {indices.shape} indices for {values.shape} values")
        if indices.size > 1 and not bool(np.all(np.diff(indices) > 0)):
            raise ValueError(f"record {record_id!r}: sparse indices must be strictly ascending")
        self.append_row(record_id, num_tokens, truncated, chunk, content_hash, split)
        self.indices.append(indices.astype(np.int32, copy=False))
        self.values.append(values.astype(np.float32, copy=False))

    def value_fields(self) -> list[pa.Field]:
        return SPARSE_FIELDS

    def value_arrays(self) -> list[pa.Array]:
        return [list_array(self.indices, pa.int32(), np.int32), list_array(self.values, pa.float32(), np.float32)]

