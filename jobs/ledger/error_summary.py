"""Why records failed, in brief: counts by error code and the first few messages.

Kept beside every count of failed records (a shard's commit, the plan, the cached status, the
manifest), so a job that failed records says why without anyone reading its error file.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from poolq.jobs.inputs.records import RecordError

SAMPLES_KEPT = 3  # messages kept per summary (the first ones, in input order)


@dataclass(frozen=True)
class ErrorSummary:
    codes: dict[str, int] = field(default_factory=dict)
    samples: tuple[str, ...] = ()

    @classmethod
    def of(cls, errors: Iterable[RecordError]) -> "ErrorSummary":
        codes: Counter[str] = Counter()
        samples: list[str] = []
        for error in errors:
            codes[error.code] += 1
            if len(samples) < SAMPLES_KEPT:
                samples.append(error.message)
        return cls(dict(codes), tuple(samples))

    @property
    def count(self) -> int:
        return sum(self.codes.values())

    def merged(self, other: "ErrorSummary") -> "ErrorSummary":
        """This summary's errors, then ``other``'s (its samples only where room is left)."""
        codes = Counter(self.codes)
        codes.update(other.codes)
        return ErrorSummary(dict(codes), (self.samples + other.samples)[:SAMPLES_KEPT])

    def describe(self) -> str:
        """``7 document_too_long, 1 missing_text; first: line 3: ...``."""
        if not self.codes:
            return "no record failed"
        by_code = ", ".join(f"{count} {code}" for code, count in sorted(self.codes.items(), key=lambda item: -item[1]))
        return by_code + (f"; first: {self.samples[0]}" if self.samples else "")


def merge_all(summaries: Iterable[ErrorSummary]) -> ErrorSummary:
    total = ErrorSummary()
    for summary in summaries:
        total = total.merged(summary)
    return total
