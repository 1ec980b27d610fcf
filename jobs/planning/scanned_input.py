"""The input as its scans found it: where each section's lines and valid records start.

The decide stage numbers records across sections from their scan records alone: a section's
first line in its object (a JSONL section counts its lines from 1), each section's first valid
record's position in the whole input, and where each object's records start (a superseding
input's later objects replace earlier ones' records; ``id_partitions.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from poolq.jobs.inputs.input_format import InputFormat
from poolq.jobs.inputs.input_section import InputSection
from poolq.jobs.ledger.planning_ledger import SectionScan


@dataclass(frozen=True)
class ScannedInput:
    input_bytes: int
    first_lines: tuple[int, ...]  # each section's first line number in its object
    line_offsets: list[int]  # what each section's own line numbers add to be its object's (Parquet: rows already are)
    bounds: np.ndarray  # each section's first position among the input's valid records, then the end
    object_starts: tuple[int, ...]  # where each object's valid records start ((0,): the input is one object)

    @classmethod
    def of(cls, sections: list[InputSection], scans: list[SectionScan], by_object: bool) -> "ScannedInput":
        """``by_object``: the objects' starts are kept apart (a superseding input)."""
        numbers = first_lines(sections, [scan.lines for scan in scans])
        valid = [scan.valid for scan in scans]
        offsets = [0 if section.format == InputFormat.PARQUET.value else numbers[index] - 1
                   for index, section in enumerate(sections)]
        return cls(input_bytes=sum(section.size_bytes for section in sections), first_lines=numbers,
                   line_offsets=offsets, bounds=np.cumsum([0, *valid]),
                   object_starts=object_starts(sections, valid) if by_object else (0,))

    @property
    def valid(self) -> list[int]:
        """Each section's valid records."""
        return [int(count) for count in np.diff(self.bounds)]


def first_lines(sections: list[InputSection], lines_read: list[int]) -> tuple[int, ...]:
    """Each section's first line number in its object (``lines_read``: each section's lines, blank
    ones too): 1 at an object's start, else one past the previous section's."""
    numbers: list[int] = []
    for index, section in enumerate(sections):
        numbers.append(1 if section.start == 0 else numbers[-1] + lines_read[index - 1])
    return tuple(numbers)


def object_starts(sections: list[InputSection], valid: list[int]) -> tuple[int, ...]:
    """Where each input object's valid records start, by position in the input (``valid``: each
    section's valid records); an object's sections are consecutive."""
    starts, position = [], 0
    for index, section in enumerate(sections):
        if index == 0 or section.uri != sections[index - 1].uri:
            starts.append(position)
        position += valid[index]
    return tuple(starts)
