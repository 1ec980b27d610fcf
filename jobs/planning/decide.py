"""The decide stage: duplicate ids and carried documents, across every section, in bounded memory.

Runs once every section is scanned. The sections' id spills are read in input order into the id
partitions (``id_partitions.py``); each partition decides on its own; then each section gets its
left-out positions (``skips.npz``: duplicates, carried and superseded, relative to the section)
and an incremental run's carried parts are written. The decided record names each section's first line.
"""
from __future__ import annotations

import io
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from poolq.jobs.inputs.included_fields import merge_section_types
from poolq.jobs.inputs.input_format import InputFormat
from poolq.jobs.inputs.input_section import InputSection
from poolq.jobs.inputs.shard_input import InputChanged
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import SKIPS_NAME, SPILL_NAME, Decided, PlanningLedger, SectionScan
from poolq.jobs.planning.id_partitions import IdPartitions, partitions_for
from poolq.jobs.planning.incremental import Baseline
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.planning.query_groups import split_query_runs
from poolq.jobs.planning.sections import sections_bytes
from poolq.jobs.reuse.reuse_plan import plan_reuse
from poolq.jobs.spec.job_spec import UriInput


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


def decide(run: PlanningRun) -> Decided:
    job = run.job
    planning = run.ledger
    sections = run.sections
    ctx = job.ctx
    scans = [planning.scan(index) for index in range(len(sections))]
    baseline = Baseline.load(job)
    partitions = partitions_for(sections_bytes(sections), ctx.settings.sharding.plan_partition_bytes)
    numbers = first_lines(sections, scans)
    with tempfile.TemporaryDirectory(prefix=f"poolq-decide-{job.id}-") as spill_dir:
        ids = IdPartitions(Path(spill_dir), partitions)
        lines_path = Path(spill_dir) / "lines.i64"  # each valid record's line (row) in its object, by position
        with lines_path.open("wb") as lines:
            for index, scan in enumerate(scans):
                # A JSONL section numbers its lines from 1; a Parquet one numbers rows in the object
                offset = 0 if sections[index].format == InputFormat.PARQUET.value else numbers[index] - 1
                _spill_section(planning, index, scan, ids, lines, offset)
        if baseline is not None and not baseline.spill_into(job.ctx, ids):
            baseline = None
        decisions = ids.decide(_object_starts(job, sections, scans))
        split = split_query_runs(planning, scans, partitions, Path(spill_dir) / "queries")
        starts = np.cumsum([0, *(scan.valid for scan in scans)])[:-1]
        line_of = np.fromfile(lines_path, dtype=np.int64)
        start = 0
        for index, scan in enumerate(scans):
            end = start + scan.valid
            firsts = ids.first_positions(start, end)
            skips = SectionSkips(ids.positions("duplicate", start, end) - start, ids.positions("carried", start, end) - start,
                                 np.sort(split.get(index, np.zeros(0, dtype=np.int64))),
                                 np.searchsorted(starts, firsts, side="right") - 1, line_of[firsts],
                                 ids.positions("superseded", start, end) - start)
            ctx.store.put(planning.section_key(index, SKIPS_NAME), skips.to_bytes())
            start = end
        carried = baseline.write_carried(job, decisions) if baseline is not None else ()
    plan_reuse(job, planning, [scan.valid for scan in scans], lambda index: _left_out(planning, index),
               sections_bytes(sections))
    included = tuple(job.spec.output.include_fields or ())
    return planning.write_decided(Decided(
        first_lines=numbers, duplicates=decisions.duplicates, superseded=decisions.superseded, carried=carried,
        field_types=merge_section_types(included, [scan.field_types for scan in scans]),
        carried_records=decisions.carried if carried else 0,
        engine=ctx.engines.identity(job.spec.model, job.spec.compute_dtype) if carried else None,  # what Baseline.load checked
    ))


def _left_out(planning: PlanningLedger, index: int) -> np.ndarray:
    """The section's positions left out of its shards (repeated ids, carried and superseded documents), sorted."""
    skips = SectionSkips.from_bytes(planning.store.get(planning.section_key(index, SKIPS_NAME)))
    return np.union1d(np.union1d(skips.duplicates, skips.carried), skips.superseded)


def _object_starts(job: JobHandle, sections: list[InputSection], scans: list[SectionScan]) -> tuple[int, ...]:
    """Where each input object's valid records start, for a superseding input (its later objects'
    records replace earlier ones'); else one object: every repeated id is a duplicate."""
    if not (isinstance(job.spec.input, UriInput) and job.spec.input.supersede):
        return (0,)
    starts, position = [], 0
    for index, (section, scan) in enumerate(zip(sections, scans)):
        if index == 0 or section.uri != sections[index - 1].uri:  # an object's sections are consecutive
            starts.append(position)
        position += scan.valid
    return tuple(starts)


def _spill_section(planning: PlanningLedger, index: int, scan: SectionScan, ids: IdPartitions, lines: IO[bytes],
                   offset: int) -> None:
    """The section's valid records into the partitions, and each one's line (``offset`` + its line
    in the section) into ``lines``."""
    numbers: list[int] = []  # one section's worth at a time
    with planning.store.open(planning.section_key(index, SPILL_NAME)) as stream:
        for raw in stream:
            record_id, digest, *line = raw.decode("utf-8").rstrip("\n").split("\t")
            ids.add_record(record_id, digest)
            numbers.append(offset + int(line[0]) if line else 0)  # 0: a spill from before lines were kept
    np.asarray(numbers, dtype=np.int64).tofile(lines)
    read = len(numbers)
    if read != scan.valid:
        raise InputChanged(f"section {index}'s id spill holds {read} records where its scan counted {scan.valid}")


def first_lines(sections: list[InputSection], scans: list[SectionScan]) -> tuple[int, ...]:
    """Each section's first line number: 1 at an object's start, else one past the previous section's."""
    numbers: list[int] = []
    for index, section in enumerate(sections):
        numbers.append(1 if section.start == 0 else numbers[-1] + scans[index - 1].lines)
    return tuple(numbers)
