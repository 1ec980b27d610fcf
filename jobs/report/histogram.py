"""Counts of values in fixed buckets: two histograms with the same edges merge exactly (by adding
counts), so shards can each count their own and the finalizer adds them up."""
from __future__ import annotations

import bisect
from typing import Iterable, Sequence

from pydantic import BaseModel, Field, model_validator

# Token lengths: powers of two from 16 (the last bucket is open). Fixed, never per job: a merge of
# histograms with other edges would not be exact.
TOKEN_EDGES: tuple[int, ...] = (0, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
# Characters, for the estimate's strata: powers of two from 64.
CHARACTER_EDGES: tuple[int, ...] = (0, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072,
                                    262144, 524288, 1048576)


def bucket_of(edges: Sequence[int], value: int) -> int:
    """The index of the bucket ``[edges[i], edges[i+1])`` holding ``value`` (the last is open)."""
    return max(0, bisect.bisect_right(edges, value) - 1)


class Histogram(BaseModel):
    """``counts[i]``: values in ``[edges[i], edges[i+1])``; the last bucket has no upper edge."""

    edges: list[int] = Field(default_factory=lambda: list(TOKEN_EDGES))
    counts: list[int] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_count_per_bucket(self) -> "Histogram":
        if not self.counts:
            self.counts = [0] * len(self.edges)
        if len(self.counts) != len(self.edges):
            raise ValueError(f"{len(self.counts)} counts for {len(self.edges)} buckets")
        return self

    def add(self, value: int, times: int = 1) -> None:  # once per document: the edges are not copied
        self.counts[bucket_of(self.edges, value)] += times

    def add_all(self, values: Iterable[int]) -> None:
        for value in values:
            self.counts[bucket_of(self.edges, value)] += 1

    def merge(self, other: "Histogram") -> "Histogram":
        """The two histograms' counts added (ValueError if their edges differ: no exact merge)."""
        if other.edges != self.edges:
            raise ValueError("histograms with different bucket edges cannot be merged exactly")
        return Histogram(edges=list(self.edges), counts=[a + b for a, b in zip(self.counts, other.counts)])

    @property
    def total(self) -> int:
        return sum(self.counts)

    def labels(self) -> list[str]:
        """``16-31``, ..., ``65536+``: each bucket as a reader sees it."""
        ends = [f"-{edge - 1}" for edge in self.edges[1:]] + ["+"]
        return [f"{start}{end}" for start, end in zip(self.edges, ends)]
