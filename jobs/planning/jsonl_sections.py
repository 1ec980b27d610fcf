"""A JSONL object's sections: line-aligned byte ranges, and their lines.

Large objects are cut at the first line end after every ``section_bytes`` (a few small ranged
GETs per cut); gzip-compressed objects cannot be entered mid-stream and stay whole.
"""
from __future__ import annotations

from typing import Iterable, Iterator

from poolq.jobs.inputs.input_format import InputFormat
from poolq.jobs.inputs.input_section import InputSection
from poolq.storage import JsonlLineError, JsonlObject, JsonlProgress, ObjectInfo, ObjectStore, read_jsonl
from poolq.storage.bounded_lines import GZIP_MAGIC
from poolq.storage.input_limits import InputLimits

_PROBE_BYTES = 64 << 10  # read while looking for a line end past a cut point


def jsonl_sections(store: ObjectStore, key: str, info: ObjectInfo, name: str | None,
                   section_bytes: int) -> list[InputSection]:
    cuts = _cut_points(store, key, info.size, section_bytes) if info.size > section_bytes else []
    bounds = [0, *cuts, info.size]
    whole = len(bounds) == 2
    return [InputSection(store.uri(key), info.version, name, start, end, whole, InputFormat.JSONL.value)
            for start, end in zip(bounds, bounds[1:])]


def jsonl_items(section: InputSection, store: ObjectStore, key: str, info: ObjectInfo, first_line: int,
                progress: JsonlProgress | None, columns: Iterable[str] | None,
                limits: InputLimits) -> Iterator[JsonlObject | JsonlLineError]:
    """Every line of the section, none held past ``limits`` (``columns`` is Parquet's: a JSONL line is parsed whole)."""
    opened = store.open(key) if section.whole else store.open_range(key, section.start, section.end)
    with opened as stream:
        yield from read_jsonl(stream, first_line=first_line, start_offset=section.start, progress=progress, limits=limits)


def jsonl_field_types(store: ObjectStore, key: str, info: ObjectInfo, names: Iterable[str]) -> dict[str, str]:
    """None: JSONL has no schema, its fields are typed by their first values as the scan reads them."""
    return {}


def _cut_points(store: ObjectStore, key: str, size: int, section_bytes: int) -> list[int]:
    """Offsets just after the first line end at or past each multiple of ``section_bytes``."""
    with store.open_range(key, 0, min(size, len(GZIP_MAGIC))) as stream:
        if stream.read() == GZIP_MAGIC:
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
