"""A JSONL line is bounded while it is read: one over the bound is its own error, skipped without
being held, and a gzip bomb stops at its line; the lines around them are read as ever."""
import gzip
import io
import json
import tracemalloc

import pytest
from support.oversize_inputs import MIB, ChunkStream, jsonl, long_line_chunks

from poolq.storage import JsonlLineError, JsonlObject, read_jsonl
from poolq.storage.input_limits import InputLimits

BEFORE = [{"id": "a", "text": "alpha"}, {"id": "b", "text": "beta"}]
AFTER = [{"id": "c", "text": "gamma"}, {"id": "d", "text": "delta"}]


def _items(chunks, limits, short=None) -> list:
    return list(read_jsonl(io.BufferedReader(ChunkStream(chunks, short)), limits=limits))


def _summary(items) -> list[tuple]:
    return [(item.line, item.value["id"]) if isinstance(item, JsonlObject) else (item.line, item.code) for item in items]


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_a_line_over_the_bound_is_its_own_error_and_the_next_lines_are_read(compressed):
    limits = InputLimits(max_record_bytes=MIB, origin=" (the test's bound)")
    items = _items(long_line_chunks(BEFORE, 3, AFTER, compressed=compressed), limits)
    assert _summary(items) == [(1, "a"), (2, "b"), (3, "record_too_large"), (4, "c"), (5, "d")]
    long_size = len(b'{"id": "long", "text": "') + 3 * MIB + len(b'"}\n')
    assert items[2].message == (f"line 3: the line holds {long_size} bytes; a record may take at most {MIB} bytes "
                                "(the test's bound); it was skipped, never held whole")
    if not compressed:  # what a shard names: the next line's bytes, after the skipped line's
        assert (items[3].offset, items[3].size) == (len(jsonl(BEFORE)) + long_size, len(jsonl(AFTER[:1])))


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_the_bound_counts_a_line_without_its_line_end(compressed):
    at_bound = json.dumps({"id": "x", "text": "y" * 100}).encode()
    limits = InputLimits(max_record_bytes=len(at_bound))
    over = at_bound[:-2] + b'y"}'  # one byte more
    for data, codes in [(at_bound + b"\n" + over + b"\n", [None, "record_too_large"]),
                        (at_bound, [None]), (over, ["record_too_large"])]:  # the last line without its end
        items = list(read_jsonl(io.BytesIO(gzip.compress(data) if compressed else data), limits=limits))
        assert [getattr(item, "code", None) for item in items] == codes


@pytest.mark.parametrize("mib", [32, 128])
def test_a_long_gzip_line_is_skipped_in_bounded_memory(mib):
    # The inputs: one line of 32 (128) MiB, 32 (128) KB of gzip; read a MiB at most at a time
    chunks = long_line_chunks(BEFORE, mib, AFTER)
    tracemalloc.start()
    try:
        items = _items(chunks, InputLimits(max_record_bytes=MIB))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert _summary(items) == [(1, "a"), (2, "b"), (3, "record_too_large"), (4, "c"), (5, "d")]
    assert peak < 6 * MIB, f"reading held {peak / MIB:.1f} MiB at its peak"


def test_a_gzip_bomb_stops_at_its_line_once_past_the_floor():
    # 1 GiB of one line from about 1 MB: streamed, never held; past 256 MiB at over 100x, reading stops
    items = _items(long_line_chunks(BEFORE, 1024, AFTER), InputLimits(max_record_bytes=13 * MIB))
    assert _summary(items) == [(1, "a"), (2, "b"), (3, "input_too_compressed")]
    assert items[2].message.startswith("line 3: the gzip stream expands to more than 100 times its compressed size")
    assert items[2].message.endswith("a decompression bomb; nothing from here on was read")


def test_a_bomb_of_short_lines_stops_at_the_same_line_however_the_source_cuts_its_reads():
    # Scan and cut read the same object twice: where it stops must not depend on the network's reads
    lines = jsonl({"id": f"r{i}", "text": "a" * 2000} for i in range(4000))  # ~8 MB, compresses ~100x+
    limits = InputLimits(max_record_bytes=MIB, max_compression_ratio=20, ratio_floor_bytes=MIB)
    whole = _items([gzip.compress(lines, mtime=0)], limits)
    cut = _items([gzip.compress(lines, mtime=0)], limits, short=777)
    assert whole == cut and whole[-1].code == "input_too_compressed" and 100 < len(whole) < 4000
    assert all(isinstance(item, JsonlObject) for item in whole[:-1])


def test_ordinary_text_is_no_bomb(sample_documents):
    rows = [{"id": f"{n}-{doc['id']}", "text": doc["text"]} for n in range(8) for doc in sample_documents]
    data = jsonl(rows)
    limits = InputLimits(max_record_bytes=MIB, max_compression_ratio=20, ratio_floor_bytes=64 << 10)
    items = list(read_jsonl(io.BytesIO(gzip.compress(data)), limits=limits))
    assert len(data) > 1 << 20 and [item.value["id"] for item in items] == [row["id"] for row in rows]


def test_without_limits_a_line_is_read_whole_as_before():
    # poolq's own files (a batch's outputs) are read without a bound: nothing changes for them
    (item,) = read_jsonl(io.BytesIO(jsonl([{"id": "x", "text": "y" * (2 * MIB)}])))
    assert isinstance(item, JsonlObject) and len(item.value["text"]) == 2 * MIB
    assert not isinstance(item, JsonlLineError)
