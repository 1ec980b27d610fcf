"""The score task's Parquet format: one ``score`` per (query, text) pair, its ``query_id`` and
``rank`` among that query's pairs (1 = highest score; ties in input order; both null for a pair
without a query id), beside the common columns (``num_tokens`` counts both texts of the pair).

A part ranks the pairs it holds: planning keeps a query's pairs in one shard."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pyarrow as pa

from poolq.storage.row_columns import RowColumns, part_schema

SCORE_FIELDS = [
    pa.field("score", pa.float32(), nullable=False),
    pa.field("query_id", pa.string(), nullable=True),
    pa.field("rank", pa.int32(), nullable=True),
]


def score_schema() -> pa.Schema:
    return part_schema(SCORE_FIELDS, with_chunks=False)


@dataclass
class ScoreRows(RowColumns):
    scores: list[float] = field(default_factory=list)
    query_ids: list[str | None] = field(default_factory=list)

    def append(self, record_id: str, score: float, num_tokens: int, truncated: bool, content_hash: str | None = None,
               query_id: str | None = None) -> None:
        self.append_row(record_id, num_tokens, truncated, None, content_hash, False)
        self.scores.append(score)
        self.query_ids.append(query_id)

    def ranks(self) -> list[int | None]:
        """Each row's rank among the rows of its query id, by score descending (stable)."""
        by_query: dict[str, list[int]] = defaultdict(list)
        for row, query_id in enumerate(self.query_ids):
            if query_id is not None:
                by_query[query_id].append(row)
        ranks: list[int | None] = [None] * len(self.scores)
        for rows in by_query.values():
            for rank, row in enumerate(sorted(rows, key=lambda r: -self.scores[r]), start=1):
                ranks[row] = rank
        return ranks

    def value_fields(self) -> list[pa.Field]:
        return SCORE_FIELDS

    def value_arrays(self) -> list[pa.Array]:
        return [pa.array(self.scores, pa.float32()), pa.array(self.query_ids, pa.string()),
                pa.array(self.ranks(), pa.int32())]
