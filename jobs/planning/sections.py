"""The input's sections: one per object, and line-aligned byte ranges of objects too large for one.

A section is what one planning task reads. Large objects are cut at the first line end after
every ``section_bytes`` (a few small ranged GETs per cut); gzip-compressed objects cannot be
entered mid-stream and stay whole.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from typing import Iterator

from poolq.jobs.context import JobContext
from poolq.jobs.inputs.input_reader import input_objects
from poolq.jobs.inputs.records import InputRecord, RecordError
from poolq.jobs.job import JobSpec
from poolq.jobs.steps.shard_input import InputChanged, InputFields
from poolq.storage import JsonlLineError, JsonlObject, JsonlProgress, ObjectStore, open_uri, read_jsonl

_GZIP_MAGIC = b"\x1f\x8b"
_PROBE_BYTES = 64 << 10  # read while looking for a line end past a cut point


@dataclass(frozen=True)
class InputSection:
    """Bytes ``[start, end)`` of one input object, as planning found it."""

    uri: str  # the object: shards read their byte ranges of it from here
    version: str  # ObjectInfo.version when the sections were listed
    name: str | None  # the object's name in error messages: its URI in a prefix input, else None
    start: int
    end: int
    whole: bool  # the section is the whole object (read as a stream: gzip allowed)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict) -> "InputSection":
        return cls(**raw)


def list_sections(spec: JobSpec, job_id: str, ctx: JobContext, section_bytes: int) -> list[InputSection]:
    """The job's input as sections, in input order (one listing and a HEAD per object).

    A score job's objects stay whole: a query's consecutive pairs are ranked together, so no
    section boundary may fall inside a run of them."""
    if InputFields.of(spec).groups_pairs:
        section_bytes = sys.maxsize
    sections: list[InputSection] = []
    for store, key, named in input_objects(spec, job_id, ctx):
        sections += _object_sections(store, key, named, section_bytes)
    return sections


def _object_sections(store: ObjectStore, key: str, named: bool, section_bytes: int) -> list[InputSection]:
    info = store.stat(key)
    uri = store.uri(key)
    name = uri if named else None
    cuts = _cut_points(store, key, info.size, section_bytes) if info.size > section_bytes else []
    bounds = [0, *cuts, info.size]
    whole = len(bounds) == 2
    return [InputSection(uri, info.version, name, start, end, whole) for start, end in zip(bounds, bounds[1:])]


def _cut_points(store: ObjectStore, key: str, size: int, section_bytes: int) -> list[int]:
    """Offsets just after the first line end at or past each multiple of ``section_bytes``."""
    with store.open_range(key, 0, min(size, len(_GZIP_MAGIC))) as stream:
        if stream.read() == _GZIP_MAGIC:
            return []
    cuts: list[int] = []
    target = section_bytes
    while target < size:
        cut = _line_end_after(store, key, target - 1, size)
        if cut >= size:
            break
        cuts.append(cut)
        target = cut + section_bytes
    return cuts


def _line_end_after(store: ObjectStore, key: str, offset: int, size: int) -> int:
    """The offset just past the first ``\\n`` at or after ``offset`` (``size`` if there is none)."""
    while offset < size:
        end = min(size, offset + _PROBE_BYTES)
        with store.open_range(key, offset, end) as stream:
            found = stream.read().find(b"\n")
        if found >= 0:
            return offset + found + 1
        offset = end
    return size


def section_lines(section: InputSection, ctx: JobContext, first_line: int = 1,
                  progress: JsonlProgress | None = None) -> Iterator[JsonlObject | JsonlLineError]:
    """Every line of ``section``; ``first_line`` numbers its first line (unknown to a scan: 1)."""
    store, key = open_uri(section.uri, ctx.settings.s3_config())
    version = store.stat(key).version
    if version != section.version:
        raise InputChanged(f"{section.uri} was replaced while the job was planned (version {section.version} "
                           f"then, {version} now): submit the job again")
    opened = store.open(key) if section.whole else store.open_range(key, section.start, section.end)
    with opened as stream:
        yield from read_jsonl(stream, first_line=first_line, start_offset=section.start, progress=progress)


Line = tuple[JsonlObject | JsonlLineError, InputRecord | RecordError]  # a line and what it holds


def section_records(section: InputSection, fields: InputFields, ctx: JobContext, first_line: int = 1,
                    progress: JsonlProgress | None = None) -> Iterator[Line]:
    """Every non-blank line of ``section`` with what it is: a valid record or the line's error.

    A failure that is not one line's (the store, the network) says where reading stopped."""
    line = 0
    try:
        for item in section_lines(section, ctx, first_line, progress):
            line = item.line
            yield item, _as_record(item, fields)
    except Exception as exc:
        where = section.name or section.uri
        exc.add_note(f"while planning {where}, after line {line}" if line else f"while opening {where}")
        raise


def _as_record(item: JsonlObject | JsonlLineError, fields: InputFields) -> InputRecord | RecordError:
    try:
        return fields.record(item)
    except Exception as exc:  # noqa: BLE001 - whatever one line holds, it is that line's error alone
        return RecordError(None, item.line, "invalid_record",
                           f"line {item.line}: cannot be read as a record: {type(exc).__name__}: {exc}")


def sections_bytes(sections: list[InputSection]) -> int:
    return sum(section.end - section.start for section in sections)


def dump_sections(sections: list[InputSection]) -> bytes:
    return json.dumps([section.to_json() for section in sections]).encode("utf-8")


def load_sections(raw: bytes) -> list[InputSection]:
    return [InputSection.from_json(item) for item in json.loads(raw)]
