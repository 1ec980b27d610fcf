"""The embedding Parquet format: id, embedding (fixed-size float32 list), num_tokens, truncated."""
from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def embedding_schema(dimensions: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("embedding", pa.list_(pa.float32(), dimensions), nullable=False),
            pa.field("num_tokens", pa.int32(), nullable=False),
            pa.field("truncated", pa.bool_(), nullable=False),
        ]
    )


@dataclass
class EmbeddingRows:
    """Column buffers for one Parquet part."""

    dimensions: int
    ids: list[str] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list, repr=False)
    num_tokens: list[int] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)

    def append(self, record_id: str, vector: np.ndarray, num_tokens: int, truncated: bool) -> None:
        if vector.shape != (self.dimensions,):
            raise ValueError(f"record {record_id!r}: vector shape {vector.shape}, expected ({self.dimensions},)")
        self.ids.append(record_id)
        self.vectors.append(vector.astype(np.float32, copy=False))
        self.num_tokens.append(num_tokens)
        self.truncated.append(truncated)

    def __len__(self) -> int:
        return len(self.ids)

    def to_table(self) -> pa.Table:
        flat = np.concatenate(self.vectors) if self.vectors else np.zeros(0, dtype=np.float32)
        embedding = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), self.dimensions)
        return pa.Table.from_arrays(
            [pa.array(self.ids, pa.string()), embedding, pa.array(self.num_tokens, pa.int32()), pa.array(self.truncated)],
            schema=embedding_schema(self.dimensions),
        )

    def to_parquet_bytes(self) -> bytes:
        sink = io.BytesIO()
        pq.write_table(self.to_table(), sink, compression="zstd")
        return sink.getvalue()


def read_embeddings(data: bytes) -> pa.Table:
    """Read a part written by :meth:`EmbeddingRows.to_parquet_bytes`."""
    return pq.read_table(io.BytesIO(data))
