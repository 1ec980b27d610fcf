"""The token tasks' Parquet formats: one list entry per token, with ``token_ids`` and
``char_offsets`` ([start, end) in the text; special tokens [0, 0]) so a reader can drop special
or punctuation tokens.

* token_embed: ``token_embeddings``: ``list<`` the job's vector type ``>`` (as ``embedding``).
* token_classify: ``token_labels`` (the top label of each token), ``token_scores`` (its score),
  and ``entities``: ``list<struct<label, char_start, char_end, score>>``; with the job's
  ``output.token_label_scores``, also ``token_label_scores``: every label's probability for each
  token, ``list<fixed_size_list<float32>[num_labels]>`` in label order (the manifest's ``labels``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from poolq.storage.embedding_codec import EmbeddingCodec, Float32Codec
from poolq.storage.row_columns import RowColumns, list_array, part_schema

_OFFSETS_TYPE = pa.list_(pa.int32(), 2)
TOKEN_FIELDS = [
    pa.field("token_ids", pa.list_(pa.int32()), nullable=False),
    pa.field("char_offsets", pa.list_(_OFFSETS_TYPE), nullable=False),
]
ENTITY_TYPE = pa.struct([
    pa.field("label", pa.string(), nullable=False), pa.field("char_start", pa.int32(), nullable=False),
    pa.field("char_end", pa.int32(), nullable=False), pa.field("score", pa.float32(), nullable=False),
])
TOKEN_CLASSIFY_FIELDS = [
    pa.field("token_labels", pa.list_(pa.string()), nullable=False),
    pa.field("token_scores", pa.list_(pa.float32()), nullable=False),
    pa.field("entities", pa.list_(ENTITY_TYPE), nullable=False),
]


def _embedding_fields(dimensions: int, codec: EmbeddingCodec) -> list[pa.Field]:
    return [pa.field("token_embeddings", pa.list_(codec.arrow_type(dimensions)), nullable=False), *TOKEN_FIELDS]


def token_embedding_schema(dimensions: int, codec: EmbeddingCodec | None = None) -> pa.Schema:
    return part_schema(_embedding_fields(dimensions, codec or Float32Codec()), with_chunks=False)


def _label_scores_field(num_labels: int) -> pa.Field:
    return pa.field("token_label_scores", pa.list_(pa.list_(pa.float32(), num_labels)), nullable=False)


def _classify_fields(label_scores_width: int | None) -> list[pa.Field]:
    extra = [] if label_scores_width is None else [_label_scores_field(label_scores_width)]
    return [*TOKEN_CLASSIFY_FIELDS, *extra, *TOKEN_FIELDS]


def token_classify_schema(label_scores_width: int | None = None) -> pa.Schema:
    """``label_scores_width``: the model's number of labels where the job stores every label's score."""
    return part_schema(_classify_fields(label_scores_width), with_chunks=False)


def _lists_of(matrices: list[np.ndarray], rows: pa.Array) -> pa.Array:
    """One list entry per matrix, holding ``rows`` (all the matrices' rows, in order) that are its own."""
    offsets = np.zeros(len(matrices) + 1, dtype=np.int32)
    np.cumsum([len(matrix) for matrix in matrices], out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), rows)


def _lists_of_rows(matrices: list[np.ndarray], width: int, value_type: pa.DataType, dtype: type) -> pa.Array:
    """``list<fixed_size_list<value_type>[width]>``: one list entry per matrix, one fixed-size list per row."""
    flat = list_array([matrix.reshape(-1) for matrix in matrices], value_type, dtype).values
    return _lists_of(matrices, pa.FixedSizeListArray.from_arrays(flat, width))


@dataclass
class _TokenColumns(RowColumns):
    token_ids: list[np.ndarray] = field(default_factory=list, repr=False)  # [n] int32 each
    char_offsets: list[np.ndarray] = field(default_factory=list, repr=False)  # [n, 2] int32 each

    def append_tokens(self, record_id: str, token_ids: np.ndarray, char_offsets: np.ndarray, rows: int) -> None:
        if token_ids.shape != (rows,) or char_offsets.shape != (rows, 2):
            raise ValueError(f"record {record_id!r}: {rows} token rows with {token_ids.shape} ids, "
                             f"{char_offsets.shape} offsets")
        self.token_ids.append(token_ids.astype(np.int32, copy=False))
        self.char_offsets.append(char_offsets.astype(np.int32, copy=False))

    def token_arrays(self) -> list[pa.Array]:
        return [list_array(self.token_ids, pa.int32(), np.int32), _lists_of_rows(self.char_offsets, 2, pa.int32(), np.int32)]


@dataclass
class TokenEmbeddingRows(_TokenColumns):
    dimensions: int = 0
    codec: EmbeddingCodec = field(default_factory=Float32Codec)
    vectors: list[np.ndarray] = field(default_factory=list, repr=False)  # [n, dimensions] float32 each

    def append(self, record_id: str, vectors: np.ndarray, token_ids: np.ndarray, char_offsets: np.ndarray,
               num_tokens: int, truncated: bool, content_hash: str | None = None) -> None:
        if vectors.ndim != 2 or vectors.shape[1] != self.dimensions:
            raise ValueError(f"record {record_id!r}: token vectors of shape {vectors.shape}, expected (n, {self.dimensions})")
        self.append_tokens(record_id, token_ids, char_offsets, vectors.shape[0])
        self.append_row(record_id, num_tokens, truncated, None, content_hash, False)
        self.vectors.append(vectors.astype(np.float32, copy=False))

    def value_fields(self) -> list[pa.Field]:
        return _embedding_fields(self.dimensions, self.codec)

    def value_arrays(self) -> list[pa.Array]:
        flat = np.concatenate(self.vectors) if self.vectors else np.zeros((0, self.dimensions), dtype=np.float32)
        return [_lists_of(self.vectors, self.codec.encode(flat)), *self.token_arrays()]


@dataclass
class TokenClassifyRows(_TokenColumns):
    """``label_names[i]`` names label ``i``; ``special_tokens``: how many tokens of each row come
    before and after its text (the template's), which belong to no entity; ``with_label_scores``:
    keep every label's score of each token, not only the top one's."""

    label_names: tuple[str, ...] = ()
    special_tokens: tuple[int, int] = (0, 0)
    with_label_scores: bool = False
    labels: list[list[str]] = field(default_factory=list)
    scores: list[np.ndarray] = field(default_factory=list, repr=False)
    entities: list[list[dict]] = field(default_factory=list)
    label_scores: list[np.ndarray] = field(default_factory=list, repr=False)  # [n, num_labels] float32 each

    def append(self, record_id: str, labels: list[str], scores: np.ndarray, entities: list[dict], token_ids: np.ndarray,
               char_offsets: np.ndarray, num_tokens: int, truncated: bool, content_hash: str | None = None,
               label_scores: np.ndarray | None = None) -> None:
        """``labels``, ``scores``: each token's top label and its score; ``label_scores``:
        ``[n, num_labels]``, every label's (needed with ``with_label_scores``)."""
        if len(labels) != len(scores):
            raise ValueError(f"record {record_id!r}: {len(labels)} token labels for {len(scores)} scores")
        if self.with_label_scores and (label_scores is None or label_scores.shape != (len(labels), len(self.label_names))):
            shape = None if label_scores is None else label_scores.shape
            raise ValueError(f"record {record_id!r}: label scores of shape {shape}, expected "
                             f"({len(labels)}, {len(self.label_names)})")
        self.append_tokens(record_id, token_ids, char_offsets, len(labels))
        self.append_row(record_id, num_tokens, truncated, None, content_hash, False)
        self.labels.append(labels)
        self.scores.append(scores.astype(np.float32, copy=False))
        self.entities.append(entities)
        if self.with_label_scores and label_scores is not None:
            self.label_scores.append(label_scores.astype(np.float32, copy=False))

    def value_fields(self) -> list[pa.Field]:
        return _classify_fields(len(self.label_names) if self.with_label_scores else None)

    def value_arrays(self) -> list[pa.Array]:
        all_scores = [_lists_of_rows(self.label_scores, len(self.label_names), pa.float32(), np.float32)
                      ] if self.with_label_scores else []
        return [pa.array(self.labels, pa.list_(pa.string())), list_array(self.scores, pa.float32(), np.float32),
                pa.array(self.entities, pa.list_(ENTITY_TYPE)), *all_scores, *self.token_arrays()]
