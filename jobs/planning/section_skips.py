"""A section's skips: which of its valid records the decide stage left out of its shards, and why.

Written by the decide stage (``section-N.skips.npz``, ``write_skips``), read by the section's cut and by the reuse
pass: duplicates (with where each id first appeared), carried documents, split query runs and
superseded records, as sorted positions relative to the section's first valid record.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np

from poolq.jobs.ledger.planning_objects import SKIPS_NAME, PlanningObjects
from poolq.jobs.planning.id_partitions import IdPartitions


def _none() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class SectionSkips:
    """A section's valid-record positions (0 = its first valid record) left out of its shards."""

    duplicates: np.ndarray  # int64, sorted: an id seen earlier in the input
    carried: np.ndarray  # int64, sorted: unchanged since the baseline
    split_queries: np.ndarray = field(default_factory=_none)  # score: see query_groups.py
    # For each duplicate, where its id first appeared: the section, and the line (row) in its object
    first_sections: np.ndarray = field(default_factory=_none)
    first_lines: np.ndarray = field(default_factory=_none)
    superseded: np.ndarray = field(default_factory=_none)  # int64, sorted: a later object has the id (input.supersede)

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, duplicates=self.duplicates, carried=self.carried, split_queries=self.split_queries,
                 first_sections=self.first_sections, first_lines=self.first_lines, superseded=self.superseded)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, raw: bytes) -> "SectionSkips":
        with np.load(io.BytesIO(raw)) as arrays:
            optional = {name: arrays[name] for name in ("split_queries", "first_sections", "first_lines", "superseded")
                        if name in arrays.files}  # skips written before these were kept
            return cls(arrays["duplicates"], arrays["carried"], **optional)

    def first_of(self, duplicate: int) -> tuple[int, int] | None:
        """(section, line) where the ``duplicate``-th duplicate's id first appeared, if known."""
        if duplicate >= len(self.first_lines):
            return None
        return int(self.first_sections[duplicate]), int(self.first_lines[duplicate])


def write_skips(objects: PlanningObjects, ids: IdPartitions, split: dict[int, np.ndarray], line_of: np.ndarray,
                bounds: np.ndarray) -> None:
    """Each section's skips, from the decided ids and the split query runs (``query_groups.py``);
    ``line_of``: each valid record's line in its object; ``bounds``: each section's first position, then the end."""
    for index in range(len(bounds) - 1):
        start, end = int(bounds[index]), int(bounds[index + 1])
        firsts = ids.first_positions(start, end)
        skips = SectionSkips(ids.positions("duplicate", start, end) - start, ids.positions("carried", start, end) - start,
                             np.sort(split.get(index, np.zeros(0, dtype=np.int64))),
                             np.searchsorted(bounds[:-1], firsts, side="right") - 1, line_of[firsts],
                             ids.positions("superseded", start, end) - start)
        objects.put(index, SKIPS_NAME, skips.to_bytes())


def read_skips(objects: PlanningObjects, section: int) -> SectionSkips:
    return SectionSkips.from_bytes(objects.get(section, SKIPS_NAME))


def left_out(objects: PlanningObjects, section: int) -> np.ndarray:
    """The section's positions left out of its shards (repeated ids, carried and superseded documents), sorted."""
    skips = read_skips(objects, section)
    return np.union1d(np.union1d(skips.duplicates, skips.carried), skips.superseded)
