"""The decide stage: duplicate ids and carried documents, across every section, in bounded memory.

Runs once every section is scanned. The sections' id spills are read in input order into the id
partitions (``id_partitions.py``); each partition decides on its own; an incremental run's
carried parts are written; then each section gets its left-out positions (``skips.npz``:
duplicates, carried and superseded, relative to the section), and the reuse pass its tables.
The decided record names each section's first line.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from poolq.jobs.inputs.included_fields import merge_section_types
from poolq.jobs.ledger.id_spill import spill_every_section
from poolq.jobs.ledger.planning_ledger import Decided, SectionScan
from poolq.jobs.planning.id_partitions import IdPartitions, partitions_for
from poolq.jobs.planning.incremental import Baseline
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.planning.query_groups import split_query_runs
from poolq.jobs.planning.scanned_input import ScannedInput
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
