"""Planning's error lines, spilled to disk as they are found and written out in input order.

First-pass errors arrive in input order; duplicate ids arrive partition by partition, so they are
filed by position range and each range is sorted on its own. The two streams merge into the
error file by (object, line), and are uploaded as they are read: memory holds one range.
"""
from __future__ import annotations

import heapq
import json
from collections import Counter
from pathlib import Path
from typing import Iterator

# Duplicate errors per range file: at most this many lines are sorted in memory at once.
DUPLICATES_PER_RANGE = 1 << 16

_Keyed = tuple[int, int, str]  # (object index, line, the error as one JSON line)


class PlanErrors:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.codes: Counter[str] = Counter()
        self._in_order = directory / "errors.tsv"
        self._in_order.touch()

    @property
    def count(self) -> int:
        return sum(self.codes.values())

    def add(self, source: int, line: int, error: dict) -> None:
        """An error of the first pass (they come in input order)."""
        self.codes[error["code"]] += 1
        with self._in_order.open("a", encoding="utf-8") as handle:
            handle.write(f"{source}\t{line}\t{json.dumps(error, ensure_ascii=False)}\n")

    def add_duplicate(self, position: int, source: int, line: int, error: dict) -> None:
        """A repeated id, found in any order; ``position`` orders it among the valid records."""
        self.codes[error["code"]] += 1
        path = self.directory / f"duplicates-{position // DUPLICATES_PER_RANGE:06d}.tsv"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"{position}\t{source}\t{line}\t{json.dumps(error, ensure_ascii=False)}\n")

    def lines(self) -> Iterator[bytes]:
        """Every error as a JSONL line, in input order."""
        for _, _, text in heapq.merge(self._first_pass(), self._duplicates(), key=lambda keyed: keyed[:2]):
            yield (text + "\n").encode("utf-8")

    def _first_pass(self) -> Iterator[_Keyed]:
        with self._in_order.open(encoding="utf-8") as handle:
            for row in handle:
                source, line, text = row.rstrip("\n").split("\t", 2)
                yield int(source), int(line), text

    def _duplicates(self) -> Iterator[_Keyed]:
        for path in sorted(self.directory.glob("duplicates-*.tsv")):
            with path.open(encoding="utf-8") as handle:
                rows = sorted((row.rstrip("\n").split("\t", 3) for row in handle), key=lambda fields: int(fields[0]))
            for _, source, line, text in rows:
                yield int(source), int(line), text
