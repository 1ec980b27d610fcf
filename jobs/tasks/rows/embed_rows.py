"""The embed task's Parquet format: ``embedding`` (fixed-size float32 list, or another encoding:
see :mod:`poolq.storage.embedding_codec`) beside the common columns (``row_columns.py``)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from poolq.storage.embedding_codec import EmbeddingCodec, Float32Codec
from poolq.storage.row_columns import (
    ChunkValues,
    RowColumns,
    part_schema,
)


def embedding_schema(dimensions: int, with_chunks: bool = False, codec: EmbeddingCodec | None = None) -> pa.Schema:
    """id, embedding (``codec``'s Arrow type, default ``fixed_size_list<float>``), then the common columns."""
    return part_schema([_embedding_field(dimensions, codec or Float32Codec())], with_chunks)


def _embedding_field(dimensions: int, codec: EmbeddingCodec) -> pa.Field:
    return pa.field("embedding", codec.arrow_type(dimensions), nullable=False)


@dataclass
class EmbeddingRows(RowColumns):
    """An embed part's buffers; ``codec`` encodes the float32 vectors when written."""

    dimensions: int = 0
    codec: EmbeddingCodec = field(default_factory=Float32Codec)
    vectors: list[np.ndarray] = field(default_factory=list, repr=False)

    def append(self, record_id: str, vector: np.ndarray, num_tokens: int, truncated: bool,
               chunk: ChunkValues | None = None, content_hash: str | None = None, split: bool = False) -> None:
        if vector.shape != (self.dimensions,):
            raise ValueError(f"record {record_id!r}: vector shape {vector.shape}, expected ({self.dimensions},)")
        self.append_row(record_id, num_tokens, truncated, chunk, content_hash, split)
        self.vectors.append(vector.astype(np.float32, copy=False))

    def value_fields(self) -> list[pa.Field]:
        return [_embedding_field(self.dimensions, self.codec)]

    def value_arrays(self) -> list[pa.Array]:
        vectors = np.stack(self.vectors) if self.vectors else np.zeros((0, self.dimensions), dtype=np.float32)
        return [self.codec.encode(vectors)]
