"""The cut stage: read a section again, leave out what was decided, cut shards, file the errors.

The section's error lines (invalid records and repeated ids) come out in line order, numbered
from the section's first line in its object, and are uploaded once the section is read. A record
superseded by a later object's (``input.supersede``) is left out silently, and not counted.
"""
from __future__ import annotations

import json
import tempfile
from collections import Counter
from typing import IO

import numpy as np

from poolq.jobs.inputs.included_fields import accepts, json_type, type_label, types_to_check
from poolq.jobs.inputs.input_format import InputFormat
from poolq.jobs.inputs.input_section import InputSection
from poolq.jobs.inputs.records import InputRecord, RecordError
from poolq.jobs.inputs.shard_input import InputChanged, InputFields
from poolq.jobs.ledger.error_summary import SAMPLES_KEPT
from poolq.jobs.ledger.planning_ledger import Decided, SectionCut, SectionScan
from poolq.jobs.ledger.planning_objects import ERRORS_NAME
from poolq.jobs.planning.planning_run import PlanningRun
from poolq.jobs.planning.section_skips import read_skips
from poolq.jobs.planning.sections import section_records
from poolq.jobs.planning.shard_cutter import ShardCutter
from poolq.storage import JsonlObject

_UPLOAD_CHUNK = 1 << 20


def cut_section(run: PlanningRun, index: int, scan: SectionScan, decided: Decided) -> SectionCut:
    """Cut section ``index`` (``scan``: its scan record) as ``decided``: write its shards and error
    lines, and return its cut record."""
    job = run.job
    sections = run.sections
    section = sections[index]
    skips = read_skips(run.objects, index)
    scanned = scan.valid
    checked_types = types_to_check(decided.field_types, scan.field_types)
    cutter = ShardCutter(job, index, section)
    codes: Counter[str] = Counter()
    samples: list[str] = []
    records = valid = replaced = 0
    duplicates, carried, split = _Positions(skips.duplicates), _Positions(skips.carried), _Positions(skips.split_queries)
    superseded = _Positions(skips.superseded)
    with tempfile.TemporaryFile() as errors:
        for item, record in section_records(job.ctx, section, InputFields.of(job.spec), decided.first_lines[index]):
            records += 1
            if isinstance(record, InputRecord) and isinstance(item, JsonlObject):
                if superseded.holds(valid):  # a later object's record with this id is the document: not counted
                    replaced += 1
                    valid += 1
                    cutter.skip()
                    continue
                repeated = duplicates.holds(valid)
                unchanged = carried.holds(valid)  # its rows are in a carried part: in no other place
                mistyped = None if unchanged else field_type_error(record, checked_types)
                if repeated:
                    first = skips.first_of(duplicates.next)  # holds() stopped at this duplicate
                    _file_error(errors, duplicate_error(record, _first_place(first, section, sections)), section,
                                codes, samples)
                elif split.holds(valid):
                    _file_error(errors, split_query_error(record), section, codes, samples)
                    repeated = True
                elif mistyped is not None:
                    _file_error(errors, mistyped, section, codes, samples)
                    repeated = True
                left_out = repeated or unchanged
                valid += 1
                if not left_out:
                    cutter.add(record, item)
                    continue
            elif isinstance(record, RecordError):
                _file_error(errors, record, section, codes, samples)
            cutter.skip()
        if valid != scanned:
            raise InputChanged(f"the input changed while job {job.id} was planned: {section.uri} held {valid} "
                               f"valid records where {scanned} were read before; submit the job again")
        shards = cutter.close()
        if codes:
            errors.seek(0)
            run.objects.put_chunks(index, ERRORS_NAME, iter(lambda: errors.read(_UPLOAD_CHUNK), b""))
    return SectionCut(records=records - replaced, valid=valid, shards=shards, characters=cutter.characters,
                      error_codes=dict(codes), error_samples=samples)


class _Positions:
    """Membership of increasing positions in a sorted array, in O(1) memory beyond the array."""

    def __init__(self, positions: np.ndarray) -> None:
        self.positions = positions
        self.next = 0

    def holds(self, position: int) -> bool:
        while self.next < len(self.positions) and self.positions[self.next] < position:
            self.next += 1
        return self.next < len(self.positions) and int(self.positions[self.next]) == position


def duplicate_error(record: InputRecord, first: str | None = None) -> RecordError:
    """``first``: where the id first appeared (``line 3``, or ``<uri>: row 3`` in another object)."""
    numeric = " (ids are compared as text: the number 7 and the string \"7\" are the same id)" if record.id.isdigit() else ""
    return RecordError(record.id, record.line, "duplicate_id",
                       f"{record.place}: this id appeared before{f', at {first}' if first else ''}{numeric}")


def _first_place(first: tuple[int, int] | None, section: InputSection, sections: list[InputSection]) -> str | None:
    """Where a duplicate's id first appeared, as its error says it."""
    if first is None or first[1] < 1:
        return None
    found = sections[first[0]]
    place = f"{'row' if found.format == InputFormat.PARQUET.value else 'line'} {first[1]}"
    return place if found.uri == section.uri else f"{found.name or found.uri}: {place}"


def field_type_error(record: InputRecord, field_types: dict[str, str]) -> RecordError | None:
    """A record whose included field holds another type than the job decided on, or None."""
    for name, field_type in field_types.items():
        value = (record.fields or {}).get(name)
        if not accepts(field_type, value):
            return RecordError(record.id, record.line, "field_type_mismatch",
                               f"{record.place}: field {name!r} holds {json_type(value)}; "
                               f"the job's column is {type_label(field_type)} (its type where the input first has it)")
    return None


def split_query_error(record: InputRecord) -> RecordError:
    return RecordError(record.id, record.line, "query_not_contiguous",
                       f"{record.place}: query_id {record.query_id!r} appeared earlier, before other queries' "
                       "pairs; a query's pairs must be consecutive to be ranked together (its earlier pairs are ranked alone)")


def _file_error(errors: IO[bytes], error: RecordError, section: InputSection, codes: Counter[str],
                samples: list[str]) -> None:
    """One error line; a prefix input's errors name their object."""
    line = error.to_json() if section.name is None else {
        **error.to_json(), "message": f"{section.name}: {error.message}", "source": section.name}
    codes[error.code] += 1
    if len(samples) < SAMPLES_KEPT:
        samples.append(line["message"])
    errors.write((json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))
