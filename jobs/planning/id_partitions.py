"""Duplicate ids and unchanged documents, decided in partitions: memory bounded by one partition.

The decide stage reads every section's scan (its valid records' ids and content hashes, in input
order) and spills each record's (position, id, content hash) into one of P local files chosen by
a stable hash of the id; an incremental run spills its baseline's (id, content hash, part) the
same way. Each partition then fits in memory alone and decides, for its ids, which positions
repeat an earlier id (``duplicate_id``) and which hold a document unchanged since the baseline
(carried). A superseding input (``input.supersede``: objects read oldest first) keeps each id's
record in the latest object holding it: the earlier objects' are *superseded*, left out without
an error; a repeat within one object is still a duplicate. Those positions are filed by position
range, and read back one section's range at a time. Nothing here grows with the corpus but the disk.
"""
from __future__ import annotations

import os
import zlib
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from poolq.jobs.inputs.spill_files import SpillFiles

# Positions per range file of decisions (the second pass holds one range at a time).
POSITIONS_PER_RANGE = 1 << 20
# Hex digits of the content hash compared (64 bits: a false "unchanged" is a 2^-64 event).
HASH_DIGITS = 16


def partition_of(record_id: str, partitions: int) -> int:
    """A stable partition (not Python's salted ``hash``): the same in every process and run."""
    return zlib.crc32(record_id.encode("utf-8")) % partitions


Left = Literal["duplicate", "carried", "superseded"]  # why a position is left out of the shards


@dataclass
class Decisions:
    """What the partitions decided: how many were carried, and which baseline ids each part carries."""

    duplicates: int = 0
    carried: int = 0
    superseded: int = 0
    carried_by_part: dict[int, Path] = field(default_factory=dict)


class IdPartitions:
    """The spill of one planning: ids are TSV-safe (no control characters, see records.py)."""

    def __init__(self, directory: Path, partitions: int) -> None:
        self.directory, self.partitions = directory, max(1, partitions)
        self._records = SpillFiles(directory, "records", self.partitions)
        self._baseline = SpillFiles(directory, "baseline", self.partitions)
        self.valid_records = 0

    def add_record(self, record_id: str, digest: str) -> int:
        """Spill the next valid record (in input order); returns its position among valid records."""
        position = self.valid_records
        self.valid_records += 1
        fields = (str(position), record_id, digest[:HASH_DIGITS])
        self._records.add(partition_of(record_id, self.partitions), "\t".join(fields) + "\n")
        return position

    def add_baseline(self, record_id: str, digest: str, part: int) -> None:
        line = "\t".join((record_id, digest[:HASH_DIGITS], str(part))) + "\n"
        self._baseline.add(partition_of(record_id, self.partitions), line)

    def discard_baseline(self) -> None:
        """Forget the baseline spilled so far (its output turned out incomplete): nothing is carried."""
        self._baseline.discard()

    def flush(self) -> None:
        """Write out what is pending (the first pass is over: its buffer is not needed meanwhile)."""
        self._records.flush()
        self._baseline.flush()

    def decide(self, object_starts: Sequence[int] = (0,)) -> Decisions:
        """Decide every partition, one at a time. ``object_starts``: the position of each input
        object's first valid record, for a superseding input; by default the input is one object,
        where every repeated id is a duplicate."""
        self.flush()
        decisions = Decisions()
        for partition in range(self.partitions):
            self._decide_partition(partition, decisions, object_starts)
        return decisions

    def _decide_partition(self, partition: int, decisions: Decisions, object_starts: Sequence[int]) -> None:
        baseline = {record_id: (digest, int(part)) for record_id, digest, part in self._baseline.read(partition)}
        kept: dict[str, int] = {}  # id -> the position kept: its first in the latest object holding it
        unchanged: dict[int, int] = {}  # a kept position whose document the baseline has -> its baseline part
        left: dict[tuple[Left, int], list[int]] = defaultdict(list)  # (why, position range) -> positions
        firsts: dict[int, list[int]] = defaultdict(list)  # position range -> (duplicate, first) pairs, flat
        carried: dict[int, list[str]] = defaultdict(list)  # baseline part -> ids it carries
        # Spill lines are in input order within a partition: the first occurrence comes first.
        for position, record_id, digest in self._records.read(partition):
            at = int(position)
            earlier = kept.get(record_id)
            if earlier is not None and bisect_right(object_starts, earlier) == bisect_right(object_starts, at):
                decisions.duplicates += 1
                left["duplicate", at // POSITIONS_PER_RANGE].append(at)
                firsts[at // POSITIONS_PER_RANGE] += (at, earlier)
                continue
            if earlier is not None:  # in an earlier object: this later one's record replaces it
                decisions.superseded += 1
                left["superseded", earlier // POSITIONS_PER_RANGE].append(earlier)
                unchanged.pop(earlier, None)
            kept[record_id] = at
            known = baseline.get(record_id)
            if known is not None and known[0] == digest:
                unchanged[at] = known[1]
        for record_id, at in kept.items():  # only the records kept are carried
            part = unchanged.get(at)
            if part is not None:
                decisions.carried += 1
                carried[part].append(record_id)
                left["carried", at // POSITIONS_PER_RANGE].append(at)
        for (why, bucket), positions in left.items():
            with self._range_path(why, bucket).open("ab") as handle:
                np.asarray(positions, dtype=np.int64).tofile(handle)
        for bucket, pairs in firsts.items():
            with (self.directory / f"duplicate-first-{bucket:06d}.i64").open("ab") as handle:
                np.asarray(pairs, dtype=np.int64).tofile(handle)
        for part, ids in carried.items():
            path = self.directory / f"carried-{part:05d}.txt"
            with path.open("a", encoding="utf-8") as handle:
                handle.writelines(f"{record_id}\n" for record_id in ids)
            decisions.carried_by_part[part] = path

    def _range_path(self, why: Left, bucket: int) -> Path:
        return self.directory / f"{why}-{bucket:06d}.i64"

    def positions(self, why: Left, start: int, end: int) -> np.ndarray:
        """The positions in ``[start, end)`` left out for ``why``, sorted (int64)."""
        found = [np.zeros(0, dtype=np.int64)]
        for bucket in range(start // POSITIONS_PER_RANGE, -(-end // POSITIONS_PER_RANGE)):
            path = self._range_path(why, bucket)
            if path.exists():
                positions = np.fromfile(path, dtype=np.int64)
                found.append(positions[(positions >= start) & (positions < end)])
        return np.sort(np.concatenate(found))


    def first_positions(self, start: int, end: int) -> np.ndarray:
        """For each duplicate in ``[start, end)``, in the order of ``positions("duplicate", ...)``,
        the position where its id first appeared (int64)."""
        found = [np.zeros((0, 2), dtype=np.int64)]
        for bucket in range(start // POSITIONS_PER_RANGE, -(-end // POSITIONS_PER_RANGE)):
            path = self.directory / f"duplicate-first-{bucket:06d}.i64"
            if path.exists():
                pairs = np.fromfile(path, dtype=np.int64).reshape(-1, 2)
                found.append(pairs[(pairs[:, 0] >= start) & (pairs[:, 0] < end)])
        pairs = np.concatenate(found)
        return pairs[np.argsort(pairs[:, 0], kind="stable"), 1]


def partitions_for(input_bytes: int, bytes_per_partition: int) -> int:
    """Enough partitions that each holds about ``bytes_per_partition`` of input."""
    return max(1, -(-input_bytes // max(1, bytes_per_partition)))


def read_ids(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def remove_spill(directory: Path) -> None:
    for path in directory.glob("*"):
        os.unlink(path)
    directory.rmdir()
