"""A bounded, uniform sample of a stream of documents, kept per character-length bucket (a
stratum): each bucket is a reservoir (Vitter's algorithm R) of at most ``per_stratum`` documents
and ``chars_per_stratum`` characters, beside the bucket's exact document and character counts.

Extrapolating bucket by bucket (post-stratification) is what makes a small sample accurate on a
mixed-length input: inside one bucket lengths differ by at most 2x, so a few hundred documents
price the bucket's thousands well, and the rare long documents get their own sample.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from poolq.jobs.report.histogram import CHARACTER_EDGES, bucket_of


@dataclass(frozen=True)
class SampledDocument:
    text: str
    content_hash: str
    chunk_spans: tuple[tuple[int, int], ...] | None = None
    query: str | None = None

    @property
    def characters(self) -> int:
        return len(self.text) + len(self.query or "")


@dataclass
class Stratum:
    documents: int = 0  # every document of the bucket seen
    characters: int = 0
    sample: list[SampledDocument] = field(default_factory=list)


class StratifiedSample:
    def __init__(self, per_stratum: int, total_chars: int, seed: int = 0) -> None:
        chars_per_stratum = max(1, total_chars // len(CHARACTER_EDGES))
        uppers = [*CHARACTER_EDGES[1:], CHARACTER_EDGES[-1] * 2]
        # A bucket of long documents holds fewer of them (never under 4): its memory stays bounded.
        self.sizes = [max(4, min(per_stratum, chars_per_stratum // upper)) for upper in uppers]
        self.strata = [Stratum() for _ in CHARACTER_EDGES]
        self._random = random.Random(seed)

    def add(self, document: SampledDocument) -> None:
        index = bucket_of(CHARACTER_EDGES, document.characters)
        stratum, size = self.strata[index], self.sizes[index]
        stratum.documents += 1
        stratum.characters += document.characters
        if len(stratum.sample) < size:
            stratum.sample.append(document)
            return
        slot = self._random.randrange(stratum.documents)  # keeps each document with probability size/documents
        if slot < size:
            stratum.sample[slot] = document

    @property
    def sampled(self) -> int:
        return sum(len(stratum.sample) for stratum in self.strata)
