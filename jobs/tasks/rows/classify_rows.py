"""The classify task's Parquet format: ``scores`` (one per label, after the model's activation,
or raw logits), the top ``label`` and its ``label_index``, and for multi-label models ``labels``
(every label whose score reaches the job's threshold), beside the common columns."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from poolq.storage.row_columns import ChunkValues, RowColumns, list_array, part_schema

CLASSIFY_FIELDS = [
    pa.field("scores", pa.list_(pa.float32()), nullable=False),
    pa.field("label", pa.string(), nullable=False),
    pa.field("label_index", pa.int32(), nullable=False),
]
MULTI_LABEL_FIELD = pa.field("labels", pa.list_(pa.string()), nullable=False)


def classify_schema(multi_label: bool, with_chunks: bool = False) -> pa.Schema:
    return part_schema(_fields(multi_label), with_chunks)


def _fields(multi_label: bool) -> list[pa.Field]:
    return [*CLASSIFY_FIELDS, MULTI_LABEL_FIELD] if multi_label else CLASSIFY_FIELDS


@dataclass
class ClassifyRows(RowColumns):
    """``label_names[i]`` names label ``i`` (the model's ``id2label``); ``multi_label`` adds
    ``labels``: the names of the labels scoring at least ``threshold``."""

    label_names: tuple[str, ...] = ()
    multi_label: bool = False
    threshold: float = 0.5
    scores: list[np.ndarray] = field(default_factory=list, repr=False)  # [num_labels] float32 each
    threshold_scores: list[np.ndarray] = field(default_factory=list, repr=False)  # what ``threshold`` is compared with

    def append(self, record_id: str, scores: np.ndarray, num_tokens: int, truncated: bool,
               chunk: ChunkValues | None = None, content_hash: str | None = None, split: bool = False,
               threshold_scores: np.ndarray | None = None) -> None:
        """``threshold_scores``: what ``threshold`` is compared with, when not ``scores`` (raw logits)."""
        if scores.shape != (len(self.label_names),):
            raise ValueError(f"record {record_id!r}: {scores.shape[-1]} scores for {len(self.label_names)} labels")
        self.append_row(record_id, num_tokens, truncated, chunk, content_hash, split)
        self.scores.append(scores.astype(np.float32, copy=False))
        self.threshold_scores.append(scores if threshold_scores is None else threshold_scores)

    def value_fields(self) -> list[pa.Field]:
        return _fields(self.multi_label)

    def value_arrays(self) -> list[pa.Array]:
        top = [int(np.argmax(row)) for row in self.scores]
        arrays = [
            list_array(self.scores, pa.float32(), np.float32),
            pa.array([self.label_names[index] for index in top], pa.string()),
            pa.array(top, pa.int32()),
        ]
        if self.multi_label:
            chosen = [[self.label_names[i] for i in np.flatnonzero(row >= self.threshold)] for row in self.threshold_scores]
            arrays.append(pa.array(chosen, pa.list_(pa.string())))
        return arrays
