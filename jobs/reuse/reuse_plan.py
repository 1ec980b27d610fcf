"""The decide step's reuse pass: which of a job's records copy an output instead of computing it.

Runs after duplicate ids and carried documents are decided, over the records kept. Every kept
record's (section, id, content hash) is spilled into local files by the hash's first hex digits
(256 files, or 4,096 or 65,536 for inputs so large that one would hold more than
``plan_partition_bytes`` of input), in input order; the files sharing the first two digits share
one partition of the tenant's index, read once for them (``ReuseStore.lookup``). In each file, per
content hash:

- the tenant stored it (``reuse: "tenant"``): every record of it copies (``tenant``, the object);
- else its first record computes it, and if it repeats, that record is its ``owner`` and every
  later one ``follow``s it (naming the owner's section, whose shards publish what owners computed).

The decisions go to one small Parquet table per section (only records that copy or own), read by
the section's shards. Memory: one file's records (at most about ``plan_partition_bytes`` of input) plus one index
partition; requests: 256 index partitions per job, never one per record.
"""
from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from poolq.engine import ModelSpecError, UnknownModelError
from poolq.jobs.inputs.spill_files import SpillFiles
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.id_spill import kept_records
from poolq.jobs.ledger.planning_objects import REUSE_TABLE_NAME, PlanningObjects
from poolq.jobs.reuse.reuse_scope import JobReuse
from poolq.jobs.reuse.reuse_store import PARTITION_DIGITS

log = logging.getLogger(__name__)

MAX_SPILL_DIGITS = PARTITION_DIGITS + 2  # at most 65,536 spill files
_TABLE_ROWS = 1 << 16  # decisions per row group of a section's table


@dataclass
class ReusePlanned:
    """What the pass decided: documents copied from the tenant's store, and repeats of a text."""

    tenant_hits: int = 0
    followers: int = 0


def spill_digits(input_bytes: int, partition_bytes: int) -> int:
    """Hex digits of the content hash naming a spill file: enough that one file holds about
    ``partition_bytes`` of input (never fewer than the index partitions: one file opens per few records
    otherwise, and opening files is what this pass would spend its time on)."""
    digits = PARTITION_DIGITS
    while digits < MAX_SPILL_DIGITS and input_bytes / 16 ** digits > partition_bytes:
        digits += 1
    return digits


def plan_reuse(job: JobHandle, objects: PlanningObjects, valid_counts: list[int],
               left_out: Callable[[int], np.ndarray], input_bytes: int) -> ReusePlanned:
    """Decide every section's reuse table; ``left_out(section)``: its sorted left-out positions;
    ``input_bytes``: the input's size, which sizes the spill files."""
    reuse = JobReuse.of(job)
    if reuse is None:
        return ReusePlanned()
    if reuse.tenant is not None and not _knows_model(reuse):
        reuse = replace(reuse, tenant=None)  # its shards fail with the model's own error; repeats still found
    settings = job.ctx.settings
    with tempfile.TemporaryDirectory(prefix=f"poolq-reuse-{job.id}-") as spill_dir:
        digits = spill_digits(input_bytes, settings.sharding.plan_partition_bytes)
        spill = SpillFiles(Path(spill_dir), "content", 16 ** digits)
        for section in range(len(valid_counts)):
            for record in kept_records(objects, section, left_out(section)):
                spill.add(int(record.digest[:digits], 16), f"{section}\t{record.record_id}\t{record.digest}\n")
        spill.flush()
        decisions = SpillFiles(Path(spill_dir), "decided", len(valid_counts))
        planned = ReusePlanned()
        if reuse.tenant is not None:
            reuse.tenant.evict(settings.reuse.reuse_ttl_s, settings.reuse.reuse_quota_bytes)
        for partition in range(16 ** PARTITION_DIGITS):
            prefix = f"{partition:0{PARTITION_DIGITS}x}"
            stored = reuse.tenant.lookup(reuse.lookup_scope, prefix) if reuse.tenant is not None else {}
            subs = 16 ** (digits - PARTITION_DIGITS)  # the spill files sharing this partition's digits
            for sub in range(subs):
                _decide_file(spill.read(partition * subs + sub), stored, decisions, planned)
        decisions.flush()
        for section in range(len(valid_counts)):
            _write_table(objects, section, decisions.read(section))
    return planned


def _knows_model(reuse: JobReuse) -> bool:
    try:
        return bool(reuse.lookup_scope)
    except (UnknownModelError, ModelSpecError) as exc:
        log.warning("job %s: no tenant reuse lookup: %s", reuse.job.id, exc)
        return False


def _by_prefix(stored: dict[str, str], width: int) -> dict[str, str]:
    """The index keyed as the scan's spill keys records: by the content hash's first ``width`` digits
    (64 bits). A shard reads a copy by the full hash: a collision costs a computation, never a wrong row."""
    return {content_hash[:width]: stored_object for content_hash, stored_object in stored.items()}


def _decide_file(rows: Iterator[list[str]], stored: dict[str, str], decisions: SpillFiles, planned: ReusePlanned) -> None:
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


TABLE_SCHEMA = pa.schema([("id", pa.string()), ("kind", pa.string()), ("owner_section", pa.int32()),
                          ("object", pa.string())])


def _write_table(objects: PlanningObjects, section: int, rows: Iterator[list[str]]) -> None:
    """The section's decisions as Parquet, built a row group at a time (spooled to a local file)."""
    with tempfile.TemporaryFile() as spooled:
        with pq.ParquetWriter(spooled, TABLE_SCHEMA) as writer:
            writer.write_table(TABLE_SCHEMA.empty_table())  # a section without decisions: an empty table
            for batch in _batches(rows):
                writer.write_table(pa.table([list(column) for column in zip(*batch)], schema=TABLE_SCHEMA))
        spooled.seek(0)
        objects.put_chunks(section, REUSE_TABLE_NAME, iter(lambda: spooled.read(1 << 20), b""))


def _batches(rows: Iterator[list[str]]) -> Iterator[list[tuple]]:
    batch: list[tuple] = []
    for record_id, kind, owner_section, stored_object in rows:
        batch.append((record_id, kind, int(owner_section), stored_object))
        if len(batch) >= _TABLE_ROWS:
            yield batch
            batch = []
    if batch:
        yield batch
