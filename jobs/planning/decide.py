"""The decide stage: duplicate ids and carried documents, across every section, in bounded memory.

Runs once every section is scanned. The sections' id spills are read in input order into the id
partitions (``id_partitions.py``); each partition decides on its own; then each section gets its
left-out positions (``skips.npz``: duplicates, carried and superseded, relative to the section)
and an incremental run's carried parts are written. The decided record names each section's first line.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import IO

import numpy as np

from poolq.jobs.inputs.included_fields import merge_section_types
from poolq.jobs.inputs.input_format import InputFormat
from poolq.jobs.inputs.shard_input import InputChanged
from poolq.jobs.ledger.planning_ledger import Decided, SectionScan
from poolq.jobs.ledger.planning_objects import SKIPS_NAME, SPILL_NAME, PlanningObjects
from poolq.jobs.planning.id_partitions import IdPartitions, partitions_for
from poolq.jobs.planning.incremental import Baseline
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.planning.query_groups import split_query_runs
from poolq.jobs.planning.section_skips import SectionSkips, left_out
from poolq.jobs.planning.sections import first_lines, object_starts, sections_bytes
from poolq.jobs.reuse.reuse_plan import plan_reuse


def decide(run: PlanningRun, scans: list[SectionScan]) -> Decided:
    """Decide over every section (``scans``: their records, in input order); returns the decided record."""
    job = run.job
    sections = run.sections
    input_bytes = sections_bytes(sections)
    numbers = first_lines(sections, [scan.lines for scan in scans])
    # A superseding input's later objects replace earlier ones' records; else every repeated id is a duplicate
    starts = object_starts(sections, [scan.valid for scan in scans]) if job.spec.supersedes else (0,)
    partitions = partitions_for(input_bytes, job.ctx.settings.sharding.plan_partition_bytes)
    included = tuple(job.spec.output.include_fields or ())
    field_types = merge_section_types(included, [scan.field_types for scan in scans])
    with tempfile.TemporaryDirectory(prefix=f"poolq-decide-{job.id}-") as spill_dir:
        ids = IdPartitions(Path(spill_dir), partitions)
        baseline = Baseline.load(job, ids, field_types)
        line_of = _spill_ids(run, scans, numbers, ids, Path(spill_dir))
        decisions = ids.decide(starts)
        bounds = np.cumsum([0, *(scan.valid for scan in scans)])  # each section's first position, and the end
        split = split_query_runs(run.objects, scans, partitions, Path(spill_dir) / "queries",
                                 lambda index: ids.positions("superseded", bounds[index], bounds[index + 1]) - bounds[index])
        _write_skips(run, ids, split, line_of, bounds)
        carried = baseline.write_carried(job, decisions) if baseline is not None else ()
    plan_reuse(job, run.objects, [scan.valid for scan in scans], lambda index: left_out(run.objects, index), input_bytes)
    return Decided(
        first_lines=numbers, duplicates=decisions.duplicates, superseded=decisions.superseded, carried=carried,
        field_types=field_types,
        carried_records=decisions.carried if carried else 0,
        # the engine Baseline.load checked the baseline's rows were made with
        engine=job.ctx.engines.identity(job.spec.model, job.spec.compute_dtype) if carried else None,
    )


def _spill_ids(run: PlanningRun, scans: list[SectionScan], numbers: tuple[int, ...], ids: IdPartitions,
               spill_dir: Path) -> np.ndarray:
    """Every section's valid records into ``ids``, in input order; returns each valid record's line
    (row) in its object, by position."""
    lines_path = spill_dir / "lines.i64"
    with lines_path.open("wb") as lines:
        for index, scan in enumerate(scans):
            # A JSONL section numbers its lines from 1; a Parquet one numbers rows in the object
            offset = 0 if run.sections[index].format == InputFormat.PARQUET.value else numbers[index] - 1
            _spill_section(run.objects, index, scan, ids, lines, offset)
    return np.fromfile(lines_path, dtype=np.int64)


def _write_skips(run: PlanningRun, ids: IdPartitions, split: dict[int, np.ndarray], line_of: np.ndarray,
                 bounds: np.ndarray) -> None:
    """Each section's skips (``section_skips.py``), from the decided ids and the split query runs;
    ``bounds``: each section's first position, then the end."""
    for index in range(len(bounds) - 1):
        start, end = int(bounds[index]), int(bounds[index + 1])
        firsts = ids.first_positions(start, end)
        skips = SectionSkips(ids.positions("duplicate", start, end) - start, ids.positions("carried", start, end) - start,
                             np.sort(split.get(index, np.zeros(0, dtype=np.int64))),
                             np.searchsorted(bounds[:-1], firsts, side="right") - 1, line_of[firsts],
                             ids.positions("superseded", start, end) - start)
        run.objects.put(index, SKIPS_NAME, skips.to_bytes())


def _spill_section(objects: PlanningObjects, index: int, scan: SectionScan, ids: IdPartitions, lines: IO[bytes],
                   offset: int) -> None:
    """The section's valid records into the partitions, and each one's line (``offset`` + its line
    in the section) into ``lines``."""
    numbers: list[int] = []  # one section's worth at a time
    with objects.open(index, SPILL_NAME) as stream:
        for raw in stream:
            record_id, digest, *rest = raw.decode("utf-8").rstrip("\n").split("\t")
            # the key an incremental run compares: the content hash, with the carried fields if any (carry_key.py)
            ids.add_record(record_id, rest[1] if len(rest) > 1 else digest)
            numbers.append(offset + int(rest[0]) if rest else 0)  # 0: a spill from before lines were kept
    np.asarray(numbers, dtype=np.int64).tofile(lines)
    read = len(numbers)
    if read != scan.valid:
        raise InputChanged(f"section {index}'s id spill holds {read} records where its scan counted {scan.valid}")
