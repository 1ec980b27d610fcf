"""The embedding Parquet format: id, embedding (fixed-size float32 list, or another encoding: see
:mod:`poolq.storage.embedding_codec`), num_tokens, truncated, content_hash (what was embedded, so a
later run can carry unchanged documents)."""
from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from poolq.storage.embedding_codec import EmbeddingCodec, Float32Codec

CHUNK_COLUMNS = ("chunk_index", "token_start", "token_end", "char_start", "char_end")
SPLIT_COLUMN = "split"  # chunk rows: a piece of a chunk longer than the window


def embedding_schema(dimensions: int, with_chunks: bool = False, codec: EmbeddingCodec | None = None) -> pa.Schema:
    """id, embedding, num_tokens, truncated, content_hash; chunk rows add where each chunk comes from.

    ``embedding`` has ``codec``'s Arrow type (default float32: ``fixed_size_list<float>``).

    ``content_hash`` is null only in rows appended without one (parts written by poolq always
    have it).
    """
    fields = [
        pa.field("id", pa.string(), nullable=False),
        pa.field("embedding", (codec or Float32Codec()).arrow_type(dimensions), nullable=False),
        pa.field("num_tokens", pa.int32(), nullable=False),
        pa.field("truncated", pa.bool_(), nullable=False),
        pa.field("content_hash", pa.string(), nullable=True),
    ]
    if with_chunks:
        fields += [pa.field(name, pa.int32(), nullable=False) for name in CHUNK_COLUMNS]
        fields.append(pa.field(SPLIT_COLUMN, pa.bool_(), nullable=False))
    return pa.schema(fields)


@dataclass
class EmbeddingRows:
    """Column buffers for one Parquet part; ``codec`` encodes the float32 vectors when written."""

    dimensions: int
    with_chunks: bool = False
    codec: EmbeddingCodec = field(default_factory=Float32Codec)
    ids: list[str] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list, repr=False)
    num_tokens: list[int] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)
    chunk_values: list[tuple[int, ...]] = field(default_factory=list)  # one CHUNK_COLUMNS tuple per row
    chunk_split: list[bool] = field(default_factory=list)  # and its SPLIT_COLUMN
    content_hashes: list[str | None] = field(default_factory=list)

    def append(self, record_id: str, vector: np.ndarray, num_tokens: int, truncated: bool,
               chunk: tuple[int, int, int, int, int] | None = None, content_hash: str | None = None,
               split: bool = False) -> None:
        if vector.shape != (self.dimensions,):
            raise ValueError(f"record {record_id!r}: vector shape {vector.shape}, expected ({self.dimensions},)")
        if (chunk is not None) != self.with_chunks:
            raise ValueError(f"record {record_id!r}: chunk columns {'missing' if self.with_chunks else 'unexpected'}")
        self.ids.append(record_id)
        self.vectors.append(vector.astype(np.float32, copy=False))
        self.num_tokens.append(num_tokens)
        self.truncated.append(truncated)
        self.content_hashes.append(content_hash)
        if chunk is not None:
            self.chunk_values.append(chunk)
            self.chunk_split.append(split)

    def __len__(self) -> int:
        return len(self.ids)

    def to_table(self) -> pa.Table:
        vectors = np.stack(self.vectors) if self.vectors else np.zeros((0, self.dimensions), dtype=np.float32)
        embedding = self.codec.encode(vectors)
        columns = [
            pa.array(self.ids, pa.string()), embedding, pa.array(self.num_tokens, pa.int32()),
            pa.array(self.truncated, pa.bool_()), pa.array(self.content_hashes, pa.string()),
        ]
        if self.with_chunks:
            by_column = list(zip(*self.chunk_values)) if self.chunk_values else [()] * len(CHUNK_COLUMNS)
            columns += [pa.array(values, pa.int32()) for values in by_column]
            columns.append(pa.array(self.chunk_split, pa.bool_()))
        return pa.Table.from_arrays(columns, schema=embedding_schema(self.dimensions, self.with_chunks, self.codec))

    def to_parquet_bytes(self) -> bytes:
        return write_embeddings(self.to_table())


def write_embeddings(table: pa.Table) -> bytes:
    """Serialize an embedding table (e.g. rows filtered out of an earlier part) as one part."""
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def read_embeddings(data: bytes, columns: list[str] | None = None) -> pa.Table:
    """Read a part written by :meth:`EmbeddingRows.to_parquet_bytes`.

    With ``columns``, only those of them the part has (parts written before ``content_hash``
    existed lack it).
    """
    source = pq.ParquetFile(io.BytesIO(data))
    if columns is not None:
        columns = [name for name in columns if name in source.schema_arrow.names]
    return source.read(columns=columns)
