"""The scan stage: validate a section's lines and spill its valid records' ids and content hashes.

Returns the section's scan record; the planning task that ran it writes it (the commit point)."""
from __future__ import annotations

import tempfile
from typing import IO, Iterator

from poolq.jobs.inputs.included_fields import first_types
from poolq.jobs.inputs.records import InputRecord
from poolq.jobs.inputs.shard_input import InputFields
from poolq.jobs.ledger.id_spill import spill_line
from poolq.jobs.ledger.planning_ledger import SectionScan
from poolq.jobs.ledger.planning_objects import GROUPS_NAME, SPILL_NAME
from poolq.jobs.planning.carry_key import record_carry_key
from poolq.jobs.planning.id_partitions import HASH_DIGITS
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.planning.sections import section_field_types, section_records
from poolq.storage import JsonlProgress

_CHUNK_BYTES = 1 << 20  # spill lines uploaded per chunk (held as line objects meanwhile)


def scan_section(run: PlanningRun, section: int) -> SectionScan:
    """Scan ``section`` of the job's input: write its id spill, and return its scan record."""
    job = run.job
    sections = run.sections
    fields = InputFields.of(job.spec)
    progress = JsonlProgress()
    counted = {"valid": 0}
    groups = _GroupRuns(tempfile.TemporaryFile()) if fields.groups_pairs else None
    # A Parquet section's schema types its carried columns; a JSONL section's first values do.
    types = section_field_types(job.ctx, sections[section], fields.include_fields)
    names = fields.include_fields

    def spill_lines() -> Iterator[bytes]:
        for _, record in section_records(job.ctx, sections[section], fields, progress=progress):
            if isinstance(record, InputRecord):
                if groups is not None:
                    groups.add(record.query_id, counted["valid"])
                if record.fields is not None and len(types) < len(fields.include_fields):
                    types.update(first_types(fields.include_fields, types, record.fields))
                counted["valid"] += 1
                digest = record.content_hash[:HASH_DIGITS]
                # the line lets a later duplicate name where its id first appeared; a job carrying
                # fields adds the key an incremental run compares (``carry_key.py``)
                carry = record_carry_key(record.content_hash, names, types, record.fields) if names else None
                yield spill_line(record.id, digest, record.line, carry)

    run.objects.put_chunks(section, SPILL_NAME, chunked(spill_lines(), _CHUNK_BYTES))
    runs = 0
    if groups is not None:
        runs = groups.close()
        groups.spill.seek(0)
        run.objects.put_chunks(section, GROUPS_NAME, iter(lambda: groups.spill.read(_CHUNK_BYTES), b""))
        groups.spill.close()
    return SectionScan(lines=progress.lines, valid=counted["valid"], groups=runs, field_types=types)


class _GroupRuns:
    """Runs of consecutive records sharing a query id, written to a local spill as they end."""

    def __init__(self, spill: IO[bytes]) -> None:
        self.spill = spill
        self.current: str | None = None
        self.first = self.count = self.runs = 0

    def add(self, query_id: str | None, position: int) -> None:
        if query_id is not None and query_id == self.current:
            self.count += 1
            return
        self._end_run()
        self.current, self.first, self.count = query_id, position, 1

    def _end_run(self) -> None:
        if self.current is not None:
            self.spill.write(f"{self.current}\t{self.first}\t{self.count}\n".encode("utf-8"))
            self.runs += 1

    def close(self) -> int:
        self._end_run()
        self.current = None
        return self.runs


def chunked(lines: Iterator[bytes], size: int) -> Iterator[bytes]:
    """``lines`` joined into chunks of about ``size`` bytes (one per upload call, not one per line)."""
    pending: list[bytes] = []
    held = 0
    for line in lines:
        pending.append(line)
        held += len(line)
        if held >= size:
            yield b"".join(pending)
            pending, held = [], 0
    if pending:
        yield b"".join(pending)
