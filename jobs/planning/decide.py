"""The decide stage: duplicate ids and carried documents, across every section, in bounded memory.

Runs once every section is scanned. The sections' id spills are read in input order into the id
partitions (``id_partitions.py``); each partition decides on its own; an incremental run's
carried parts are written; then each section gets its left-out positions (``skips.npz``:
duplicates, carried and superseded, relative to the section), and the reuse pass its tables.
The decided record names each section's first line: the stage numbers records across sections
from their scan records alone (``ScannedInput``).
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from poolq.jobs.inputs.included_fields import merge_section_types
from poolq.jobs.inputs.input_format import InputFormat
from poolq.jobs.inputs.input_section import InputSection
from poolq.jobs.ledger.id_spill import spill_every_section
from poolq.jobs.ledger.planning_ledger import Decided, SectionScan
from poolq.jobs.planning.id_partitions import IdPartitions, partitions_for
from poolq.jobs.planning.incremental import Baseline
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.planning.query_groups import split_query_runs
from poolq.jobs.planning.section_skips import left_out, write_skips
from poolq.jobs.reuse.reuse_plan import plan_reuse


def decide(run: PlanningRun, scans: list[SectionScan]) -> Decided:
    """Decide over every section (``scans``: their records, in input order); returns the decided record."""
    job = run.job
    scanned = ScannedInput.of(run.sections, scans, by_object=job.spec.supersedes)
    partitions = partitions_for(scanned.input_bytes, job.ctx.settings.sharding.plan_partition_bytes)
    field_types = merge_section_types(tuple(job.spec.output.include_fields or ()), [scan.field_types for scan in scans])
    with tempfile.TemporaryDirectory(prefix=f"poolq-decide-{job.id}-") as spill_dir:
        ids = IdPartitions(Path(spill_dir), partitions)
        line_of = spill_every_section(run.objects, scanned.valid, scanned.line_offsets, ids.add_record,
                                      Path(spill_dir) / "lines.i64")
        baseline = Baseline.load(job, ids, field_types)
        # A superseding input's later objects replace earlier ones' records; else every repeated id is a duplicate
        decisions = ids.decide(scanned.object_starts)
        carried = baseline.write_carried(job, decisions) if baseline is not None else ()
        bounds = scanned.bounds
        split = split_query_runs(run.objects, scans, partitions, Path(spill_dir) / "queries",
                                 lambda index: ids.positions("superseded", bounds[index], bounds[index + 1]) - bounds[index])
        write_skips(run.objects, ids, split, line_of, bounds)
    plan_reuse(job, run.objects, scanned.valid, lambda index: left_out(run.objects, index), scanned.input_bytes)
    return Decided(
        first_lines=scanned.first_lines, duplicates=decisions.duplicates, superseded=decisions.superseded,
        carried=carried, field_types=field_types,
        carried_records=decisions.carried if carried else 0,
        # the engine Baseline.load checked the baseline's rows were made with
        engine=job.ctx.engines.identity(job.spec.model, job.spec.compute_dtype) if carried else None,
    )


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
