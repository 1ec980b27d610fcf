"""Score jobs: a query's pairs must be consecutive, so that one shard holds them all and ranks them.

The scan spills each run of consecutive pairs sharing a query id (``groups.tsv``). Here the runs
of every section are read in input order into id partitions keyed by query id (memory bounded
by one partition, as for duplicate ids); a run whose query id appeared in an earlier run is
split off: its pairs become ``query_not_contiguous`` errors, and the first run is ranked alone.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from poolq.jobs.ledger.planning_ledger import SectionScan
from poolq.jobs.ledger.planning_objects import GROUPS_NAME, PlanningObjects
from poolq.jobs.planning.id_partitions import IdPartitions

_RUN_FIELDS = 3  # section, first position, count: one int64 triple per run, in run order


def split_query_runs(objects: PlanningObjects, scans: list[SectionScan], partitions: int, spill_dir: Path,
                     superseded: Callable[[int], np.ndarray]) -> dict[int, np.ndarray]:
    """Per section, the positions (relative to the section) of pairs in runs that repeat a query id.
    ``superseded(section)``: the section's superseded positions, sorted (a run of those alone is no run:
    a later object re-sent its pairs, and that object's run is the query's)."""
    total = sum(scan.groups for scan in scans)
    if not total:
        return {}
    runs_path = spill_dir / "query-runs.i64"
    ids = IdPartitions(spill_dir / "query-runs", partitions)
    with runs_path.open("wb") as runs:
        for section, scan in enumerate(scans):
            if scan.groups:
                _spill_runs(objects, section, ids, runs, superseded(section))
    ids.decide()
    repeated = ids.positions("duplicate", 0, total)
    if not len(repeated):
        return {}
    table = np.memmap(runs_path, dtype=np.int64, mode="r").reshape(-1, _RUN_FIELDS)
    by_section: dict[int, list[np.ndarray]] = {}
    for section, first, count in table[repeated]:
        by_section.setdefault(int(section), []).append(np.arange(first, first + count, dtype=np.int64))
    return {section: np.concatenate(parts) for section, parts in by_section.items()}


def _spill_runs(objects: PlanningObjects, section: int, ids: IdPartitions, runs, superseded: np.ndarray) -> None:
    with objects.open(section, GROUPS_NAME) as stream:
        for raw in stream:
            query_id, first, count = raw.decode("utf-8").rstrip("\n").split("\t")
            start, end = int(first), int(first) + int(count)
            if np.searchsorted(superseded, end) - np.searchsorted(superseded, start) == end - start:
                continue  # every pair of it superseded: left out, as if never sent
            ids.add_record(query_id, "")  # the run's index in ``runs`` is its position among the ids
            np.array([section, start, end - start], dtype=np.int64).tofile(runs)
