"""The score task's Parquet format: one ``score`` per (query, text) pair, beside the common
columns (``num_tokens`` counts both texts of the pair)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from poolq.storage.row_columns import RowColumns, part_schema

SCORE_FIELDS = [pa.field("score", pa.float32(), nullable=False)]


def score_schema() -> pa.Schema:
    return part_schema(SCORE_FIELDS, with_chunks=False)


@dataclass
class ScoreRows(RowColumns):
    scores: list[float] = field(default_factory=list)

    def append(self, record_id: str, score: float, num_tokens: int, truncated: bool, content_hash: str | None = None) -> None:
        self.append_row(record_id, num_tokens, truncated, None, content_hash, False)
        self.scores.append(score)

    def value_fields(self) -> list[pa.Field]:
        return SCORE_FIELDS

    def value_arrays(self) -> list[pa.Array]:
        return [pa.array(self.scores, pa.float32())]
