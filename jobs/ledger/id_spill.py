"""A section's id spill (``section-N.ids.tsv``): what the scan stage keeps of each valid record.

One line per valid record, in input order: id <TAB> content hash <TAB> line (in the section:
JSONL; in the object: Parquet), then <TAB> carry key for a job carrying fields
(``planning/carry_key.py``). Ids hold no tab or newline (``records.py``). The scan writes it; the
decide stage and the reuse pass stream it back, a line at a time (~40 bytes per document: never
held whole). The line format is read and written here alone.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, NamedTuple

import numpy as np

from poolq.jobs.inputs.shard_input import InputChanged
from poolq.jobs.ledger.planning_objects import SPILL_NAME, PlanningObjects


class SpilledRecord(NamedTuple):
    record_id: str
    digest: str  # the content hash's first digits
    line: int | None  # in the section (JSONL) or the object (Parquet); None: a spill from before lines were kept
    carry_key: str | None  # a job carrying fields: the key an incremental run compares

    @property
    def unchanged_key(self) -> str:
        """What an incremental run compares with the baseline: the carry key, else the content hash."""
        return self.carry_key if self.carry_key is not None else self.digest


def spill_line(record_id: str, digest: str, line: int, carry_key: str | None) -> bytes:
    fields = (record_id, digest, str(line), carry_key) if carry_key else (record_id, digest, str(line))
    return ("\t".join(fields) + "\n").encode("utf-8")


def _parsed(raw: bytes) -> SpilledRecord:
    record_id, digest, *rest = raw.decode("utf-8").rstrip("\n").split("\t")
    return SpilledRecord(record_id, digest, int(rest[0]) if rest else None, rest[1] if len(rest) > 1 else None)


def read_id_spill(objects: PlanningObjects, section: int) -> Iterator[SpilledRecord]:
    with objects.open(section, SPILL_NAME) as stream:
        for raw in stream:
            yield _parsed(raw)


def kept_records(objects: PlanningObjects, section: int, left_out: np.ndarray) -> Iterator[SpilledRecord]:
    """The section's records but those at the ``left_out`` positions (sorted: walked, not copied)."""
    skip = 0
    for position, record in enumerate(read_id_spill(objects, section)):
        while skip < len(left_out) and left_out[skip] < position:
            skip += 1
        if skip < len(left_out) and left_out[skip] == position:
            continue
        yield record


def spill_every_section(objects: PlanningObjects, valid: list[int], line_offsets: list[int],
                        add: Callable[[str, str], object], lines_path: Path) -> np.ndarray:
    """Every section's records, in input order, to ``add(id, unchanged key)``; returns each one's
    line (row) in its object, by position (``line_offsets``: what each section's lines add; spilled
    to ``lines_path``, one section's worth held at a time). ``valid``: each section's count, as its
    scan recorded it (a spill that holds another count was overwritten since: InputChanged)."""
    with lines_path.open("wb") as lines:
        for section, (expected, offset) in enumerate(zip(valid, line_offsets)):
            numbers: list[int] = []
            for record in read_id_spill(objects, section):
                add(record.record_id, record.unchanged_key)
                numbers.append(offset + record.line if record.line is not None else 0)
            np.asarray(numbers, dtype=np.int64).tofile(lines)
            if len(numbers) != expected:
                raise InputChanged(f"section {section}'s id spill holds {len(numbers)} records where its scan "
                                   f"counted {expected}")
    return np.fromfile(lines_path, dtype=np.int64)
