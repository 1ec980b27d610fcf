"""The decide step's reuse pass: which of a job's records copy an output instead of computing it.

Runs after duplicate ids and carried documents are decided, over the records kept. Every kept
record's (section, id, content hash) is spilled into 4,096 local files by the hash's first three
hex digits, in input order; each group of 16 files shares the two digits of one partition of the
tenant's index, which is read once for them (``ReuseStore.lookup``). In each file, per content hash:

- the tenant stored it (``reuse: "tenant"``): every record of it copies (``tenant``, the object);
- else its first record computes it, and if it repeats, that record is its ``owner`` and every
  later one ``follow``s it (naming the owner's section, whose shards publish what owners computed).

The decisions go to one small Parquet table per section (only records that copy or own), read by
the section's shards. Memory: one file's records (~1/4096 of the input) plus one index partition;
requests: 256 index partitions per job, never one per record.
"""
from __future__ import annotations

import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import SPILL_NAME, PlanningLedger
from poolq.jobs.reuse.reuse_scope import SECTION_TABLE, JobReuse
from poolq.jobs.reuse.reuse_store import PARTITION_DIGITS
from poolq.storage import write_embeddings

SPILL_DIGITS = PARTITION_DIGITS + 1  # 4,096 spill files
_FLUSH_LINES = 1 << 16


@dataclass
class ReusePlanned:
    """What the pass decided: documents copied from the tenant's store, and repeats of a text."""

    tenant_hits: int = 0
    followers: int = 0


def plan_reuse(job: JobHandle, planning: PlanningLedger, valid_counts: list[int],
               left_out: Callable[[int], np.ndarray]) -> ReusePlanned:
    """Decide every section's reuse table; ``left_out(section)``: its sorted left-out positions."""
    reuse = JobReuse.of(job)
    if reuse is None:
        return ReusePlanned()
    if reuse.tenant is not None:
        settings = job.ctx.settings
        reuse.tenant.evict(settings.reuse_ttl_s, settings.reuse_quota_bytes)
    with tempfile.TemporaryDirectory(prefix=f"poolq-reuse-{job.id}-") as spill_dir:
        spill = _Spill(Path(spill_dir) / "content", 16 ** SPILL_DIGITS)
        for section in range(len(valid_counts)):
            _spill_section(planning, section, left_out(section), spill)
        spill.flush()
        decisions = _Spill(Path(spill_dir) / "decided", len(valid_counts))
        planned = ReusePlanned()
        for partition in range(16 ** PARTITION_DIGITS):
            prefix = f"{partition:0{PARTITION_DIGITS}x}"
            stored = reuse.tenant.lookup(reuse.scope, prefix) if reuse.tenant is not None else {}
            for sub in range(16):
                _decide_file(spill.read(partition * 16 + sub), stored, decisions, planned)
        decisions.flush()
        for section in range(len(valid_counts)):
            _write_table(planning, section, decisions.read(section))
    return planned


def _spill_section(planning: PlanningLedger, section: int, left_out: np.ndarray, spill: "_Spill") -> None:
    skipped = set(left_out.tolist())  # one section's left-out positions
    with planning.store.open(planning.section_key(section, SPILL_NAME)) as stream:
        for position, raw in enumerate(stream):
            if position in skipped:
                continue
            record_id, digest, *_ = raw.decode("utf-8").rstrip("\n").split("\t")
            spill.add(int(digest[:SPILL_DIGITS], 16), f"{section}\t{record_id}\t{digest}\n")


def _by_prefix(stored: dict[str, str], width: int) -> dict[str, str]:
    """The index keyed as the scan's spill keys records: by the content hash's first ``width`` digits
    (64 bits). A shard reads a copy by the full hash: a collision costs a computation, never a wrong row."""
    return {content_hash[:width]: stored_object for content_hash, stored_object in stored.items()}


def _decide_file(rows: Iterator[list[str]], stored: dict[str, str], decisions: "_Spill", planned: ReusePlanned) -> None:
    owners: dict[str, tuple[str, str, bool]] = {}  # content hash -> (section, id, has followers)
    prefixed: dict[str, str] | None = None
    for section, record_id, digest in rows:
        prefixed = _by_prefix(stored, len(digest)) if prefixed is None else prefixed
        if digest in prefixed:
            decisions.add(int(section), f"{record_id}\ttenant\t-1\t{prefixed[digest]}\n")
            planned.tenant_hits += 1
            continue
        owner = owners.get(digest)
        if owner is None:
            owners[digest] = (section, record_id, False)
            continue
        if not owner[2]:
            decisions.add(int(owner[0]), f"{owner[1]}\towner\t-1\t\n")
            owners[digest] = (owner[0], owner[1], True)
        decisions.add(int(section), f"{record_id}\tfollow\t{owner[0]}\t\n")
        planned.followers += 1


def _write_table(planning: PlanningLedger, section: int, rows: Iterator[list[str]]) -> None:
    ids, kinds, owner_sections, objects = [], [], [], []
    for record_id, kind, owner_section, stored_object in rows:
        ids.append(record_id)
        kinds.append(kind)
        owner_sections.append(int(owner_section))
        objects.append(stored_object)
    table = pa.table({"id": pa.array(ids, pa.string()), "kind": pa.array(kinds, pa.string()),
                      "owner_section": pa.array(owner_sections, pa.int32()), "object": pa.array(objects, pa.string())})
    planning.store.put(planning.section_key(section, SECTION_TABLE), write_embeddings(table))


class _Spill:
    """Tab-separated lines appended to numbered local files, in batches."""

    def __init__(self, directory: Path, files: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory, self.files = directory, files
        self.pending: dict[int, list[str]] = defaultdict(list)
        self.lines = 0

    def _path(self, number: int) -> Path:
        return self.directory / f"{number:05d}.tsv"

    def add(self, number: int, line: str) -> None:
        self.pending[number].append(line)
        self.lines += 1
        if self.lines >= _FLUSH_LINES:
            self.flush()

    def flush(self) -> None:
        for number, lines in self.pending.items():
            with self._path(number).open("a", encoding="utf-8") as handle:
                handle.writelines(lines)
        self.pending.clear()
        self.lines = 0

    def read(self, number: int) -> Iterator[list[str]]:
        path = self._path(number)
        if path.exists():
            with path.open(encoding="utf-8") as handle:
                for line in handle:
                    yield line.rstrip("\n").split("\t")
