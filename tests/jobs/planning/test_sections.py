"""Cutting input objects into sections: at line ends, never inside a line, never in a gzip stream."""
import gzip

import pytest

from poolq.jobs.planning import jsonl_sections as sections_module
from poolq.jobs.planning.sections import _object_sections
from poolq.storage import LocalObjectStore


@pytest.fixture
def store(tmp_path):
    return LocalObjectStore(tmp_path)


def _cut(store, key, data: bytes, section_bytes: int) -> list[tuple[int, int]]:
    store.put(key, data)
    found = _object_sections(store, key, named=False, section_bytes=section_bytes)
    return [(section.start, section.end) for section in found]


@pytest.mark.parametrize("section_bytes", [1, 7, 30, 64, 1000])
def test_sections_are_line_aligned_contiguous_and_cover_the_object(store, section_bytes):
    lines = [f'{{"id": "{i}", "text": "{"x" * (i * 3 % 40)}"}}\n'.encode() for i in range(20)]
    data = b"".join(lines)
    bounds = _cut(store, "a.jsonl", data, section_bytes)
    assert bounds[0][0] == 0 and bounds[-1][1] == len(data)
    assert all(end == next_start for (_, end), (next_start, _) in zip(bounds, bounds[1:]))
    line_ends = {sum(len(line) for line in lines[:n]) for n in range(len(lines) + 1)}
    assert all(start in line_ends for start, _ in bounds)
    if section_bytes < len(data) // 2:
        assert len(bounds) > 1


def test_a_line_longer_than_the_probe_is_not_cut(store, monkeypatch):
    # Given a probe of 8 bytes and a 100-byte line straddling the cut point
    monkeypatch.setattr(sections_module, "_PROBE_BYTES", 8)
    data = b"short\n" + b"y" * 100 + b"\nlast\n"
    bounds = _cut(store, "long.jsonl", data, section_bytes=10)
    # Then the section ends after the long line, not inside it
    assert bounds[0] == (0, 107) and bounds[-1][1] == len(data)


def test_an_object_without_a_final_newline_ends_its_last_section(store):
    data = b"a\nbb\nccc"
    assert _cut(store, "x.jsonl", data, section_bytes=3) == [(0, 5), (5, 8)]


def test_gzip_and_small_objects_stay_whole(store):
    data = gzip.compress(b"".join(f"line {i}\n".encode() for i in range(500)))
    store.put("z.jsonl.gz", data)
    (section,) = _object_sections(store, "z.jsonl.gz", named=True, section_bytes=64)
    assert section.whole and (section.start, section.end) == (0, len(data)) and section.name.endswith("z.jsonl.gz")
    assert _cut(store, "small.jsonl", b"a\n", section_bytes=1 << 20) == [(0, 2)]
    assert _cut(store, "empty.jsonl", b"", section_bytes=1 << 20) == [(0, 0)]
