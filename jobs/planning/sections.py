"""The input's sections: one per object, and ranges of objects too large for one.

A section is what one planning task reads. Each object is read in its own format
(``input_format.py``): a JSONL object is cut into line-aligned byte ranges
(``jsonl_sections.py``), a Parquet object into runs of whole row groups
(``parquet_sections.py``); both yield their records as numbered items (lines, rows), each
read within the settings' record limits (``jobs/inputs/record_limits.py``): an oversize record
is its own error, never held whole.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from poolq.jobs.context import JobContext
from poolq.jobs.inputs.input_format import InputFormat, object_format
from poolq.jobs.inputs.input_section import InputSection
from poolq.jobs.inputs.record_limits import input_limits, text_too_long
from poolq.jobs.inputs.records import InputRecord, RecordError
from poolq.jobs.inputs.shard_input import InputChanged, InputFields
from poolq.jobs.planning.jsonl_sections import jsonl_field_types, jsonl_items, jsonl_sections
from poolq.jobs.planning.parquet_sections import (
    parquet_field_types,
    parquet_items,
    parquet_sections,
    require_parquet_columns,
)
from poolq.storage import JsonlLineError, JsonlObject, JsonlProgress, ObjectInfo, ObjectStore, open_uri
from poolq.storage.input_limits import InputLimits

__all__ = ["InputSection", "as_record", "list_sections", "section_lines", "section_records", "section_field_types"]


@dataclass(frozen=True)
class _Format:
    """How sections of one input format are listed and read (the functions of its module)."""

    sections: Callable[[ObjectStore, str, ObjectInfo, str | None, int], list[InputSection]]
    items: Callable[[InputSection, ObjectStore, str, ObjectInfo, int, JsonlProgress | None, Iterable[str] | None,
                     InputLimits], Iterator[JsonlObject | JsonlLineError]]
    field_types: Callable[[ObjectStore, str, ObjectInfo, Iterable[str]], dict[str, str]]


_FORMATS = {
    InputFormat.JSONL: _Format(jsonl_sections, jsonl_items, jsonl_field_types),
    InputFormat.PARQUET: _Format(parquet_sections, parquet_items, parquet_field_types),
}


def list_sections(objects: Iterable[tuple[ObjectStore, str, bool]], fields: InputFields,
                  section_bytes: int) -> list[InputSection]:
    """The input's ``objects`` (``input_objects.py``) as sections, in input order (a HEAD per
    object). A score job's objects stay whole: a query's consecutive pairs are ranked together, so
    no section boundary may fall inside a run of them."""
    if fields.groups_pairs:
        section_bytes = sys.maxsize
    # Columns every record needs: a Parquet object without one fails the job once, naming it.
    required = tuple(name for name in (fields.id_field, fields.text_field, fields.query_field) if name is not None)
    sections: list[InputSection] = []
    for store, key, named in objects:
        sections += _object_sections(store, key, named, section_bytes, required)
    return sections


def _object_sections(store: ObjectStore, key: str, named: bool, section_bytes: int,
                     required: tuple[str, ...] = ()) -> list[InputSection]:
    info = store.stat(key)
    name = store.uri(key) if named else None
    input_format = object_format(store, key, info.size)
    if input_format is InputFormat.PARQUET:
        require_parquet_columns(store, key, info, required)
    return _FORMATS[input_format].sections(store, key, info, name, section_bytes)


def _opened(ctx: JobContext, section: InputSection) -> tuple[ObjectStore, str, ObjectInfo]:
    """The section's object, checked to be the one that was listed."""
    store, key = open_uri(section.uri, ctx.settings.storage.s3_config())
    info = store.stat(key)
    if info.version != section.version:
        raise InputChanged(f"{section.uri} was replaced while the job was planned (version {section.version} "
                           f"then, {info.version} now): submit the job again")
    return store, key, info


def section_lines(ctx: JobContext, section: InputSection, first_line: int = 1, progress: JsonlProgress | None = None,
                  columns: Iterable[str] | None = None) -> Iterator[JsonlObject | JsonlLineError]:
    """Every line (row) of ``section``; ``first_line`` numbers a JSONL section's first line (unknown
    to a scan: 1); ``columns``: what a Parquet section reads of its rows (None: every column)."""
    store, key, info = _opened(ctx, section)
    limits = input_limits(ctx.settings)
    yield from _FORMATS[InputFormat(section.format)].items(section, store, key, info, first_line, progress, columns, limits)


def section_field_types(ctx: JobContext, section: InputSection, names: tuple[str, ...]) -> dict[str, str]:
    """The types the section's own schema gives the carried fields ``names`` (Parquet), else none."""
    if not names:
        return {}
    store, key, info = _opened(ctx, section)
    return _FORMATS[InputFormat(section.format)].field_types(store, key, info, names)


Line = tuple[JsonlObject | JsonlLineError, InputRecord | RecordError]  # a line and what it holds


def section_records(ctx: JobContext, section: InputSection, fields: InputFields, first_line: int = 1,
                    progress: JsonlProgress | None = None) -> Iterator[Line]:
    """Every non-blank line of ``section`` with what it is: a valid record or the line's error.

    A failure that is not one line's (the store, the network) says where reading stopped."""
    last = ""
    max_chars = ctx.settings.limits.max_document_chars
    try:
        for item in section_lines(ctx, section, first_line, progress, fields.columns()):
            last = f"{item.unit} {item.line}"
            yield item, as_record(item, fields, max_chars)
    except Exception as exc:
        where = section.name or section.uri
        exc.add_note(f"while planning {where}, after {last}" if last else f"while opening {where}")
        raise


def as_record(item: JsonlObject | JsonlLineError, fields: InputFields, max_chars: int) -> InputRecord | RecordError:
    """The line as a record, its text within ``max_chars`` (as an inline document's), or its error."""
    try:
        record = fields.record(item)
    except Exception as exc:  # noqa: BLE001 - whatever one line holds, it is that line's error alone
        return RecordError(None, item.line, "invalid_record",
                           f"{item.unit} {item.line}: cannot be read as a record: {type(exc).__name__}: {exc}")
    if isinstance(record, InputRecord) and (too_long := text_too_long(record, max_chars)) is not None:
        return too_long
    return record
