"""Property-based fuzzing of JSONL reading (``read_jsonl``) and record validation (``to_record``).

Whatever the bytes: reading never raises; every non-blank line gives exactly one result, in
order, naming its line; each line the independent oracle (jsonl_strategies.expect_line) calls a
record becomes an InputRecord with that id and text, every other line an error with the
oracle's code; every error is writable to the (UTF-8) error file. Gzip and a stream that trickles
a few bytes per read give the same results as the plain bytes.
"""
from __future__ import annotations

import io
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from jsonl_strategies import (
    BOM,
    HAND_LINES,
    LINE_CODES,
    TrickleStream,
    any_line,
    expect_file,
    expect_line,
    fuzz_settings,
    gzipped,
    jsonl_files,
    nested,
)

from poolq.jobs.inputs.records import InputRecord, RecordError, to_record
from poolq.jobs.inputs.shard_input import ShardInput
from poolq.storage import JsonlLineError, JsonlObject, read_jsonl
from poolq.storage.jsonl import parse_jsonl_line


def _read(stream) -> list:
    return list(read_jsonl(stream))


def _as_tuples(results: list) -> list[tuple]:
    return [(type(r).__name__, r.line, getattr(r, "code", None), repr(getattr(r, "value", None))) for r in results]


def check_results(content: bytes, results: list) -> None:
    expected = expect_file(content)
    assert [r.line for r in results] == [e.line for e in expected], "one result per non-blank line, in order"
    for result, want in zip(results, expected):
        assert isinstance(result, (JsonlObject, JsonlLineError))
        if isinstance(result, JsonlLineError):
            assert want.code in LINE_CODES, (result, want)
            assert result.code == want.code, (result, want)
            assert result.message.startswith(f"line {want.line}:"), result.message
        else:
            assert isinstance(result.value, dict) and want.code not in LINE_CODES, (result, want)
        record = to_record(result, "id", "text")
        assert record.line == want.line
        if want.is_record:
            assert isinstance(record, InputRecord), (record, want)
            assert (record.id, record.text) == (want.id, want.text)
        else:
            assert isinstance(record, RecordError), (record, want)
            assert record.code == want.code, (record, want)
            assert f"line {want.line}" in record.message
            # it must fit the error file: UTF-8 JSON, one line
            line = json.dumps(record.to_json(), ensure_ascii=False).encode("utf-8")
            assert b"\n" not in line
        if isinstance(record, InputRecord):  # it must fit a shard descriptor
            ShardInput(records=[record]).to_bytes()


@fuzz_settings(400)
@given(content=jsonl_files())
@example(content=b"")
@example(content=BOM)
@example(content=b"\n".join(HAND_LINES))
@example(content=b"\r\n".join(HAND_LINES) + b"\r\n")
@example(content=BOM + b'{"id": "first", "text": "x"}\n' + BOM + b'{"id": "second", "text": "y"}\n')
def test_reading_never_raises_and_matches_the_oracle(content):
    check_results(content, _read(io.BytesIO(content)))


@fuzz_settings(100)
@given(content=jsonl_files(max_lines=12))
def test_gzip_reads_the_same_as_plain(content):
    assert _as_tuples(_read(io.BytesIO(gzipped(content)))) == _as_tuples(_read(io.BytesIO(content)))


@fuzz_settings(60)
@given(content=jsonl_files(max_lines=12), step=st.integers(1, 7))
def test_a_trickling_stream_reads_the_same(content, step):
    assert _as_tuples(_read(TrickleStream(content, step))) == _as_tuples(_read(io.BytesIO(content)))


@fuzz_settings(60)
@given(content=jsonl_files(max_lines=12), step=st.integers(1, 7))
def test_a_trickling_gzip_stream_reads_the_same(content, step):
    # A raw stream may return fewer bytes than asked (a socket, a streamed HTTP body): gzip must
    # still be recognised from its first two bytes.
    assert _as_tuples(_read(TrickleStream(gzipped(content), step))) == _as_tuples(_read(io.BytesIO(content)))


@fuzz_settings(300)
@given(raw=any_line, number=st.integers(1, 3))
def test_one_line_parses_to_the_oracle(raw, number):
    raw = raw.replace(b"\n", b" ")  # one line
    want = expect_line(raw, number)
    got = parse_jsonl_line(raw, number)
    if want is None:
        assert got is None
        return
    assert got is not None and got.line == number
    record = to_record(got, "id", "text")
    if want.is_record:
        assert isinstance(record, InputRecord) and (record.id, record.text) == (want.id, want.text), (record, want)
    else:
        assert isinstance(record, RecordError) and record.code == want.code, (record, want)


@fuzz_settings(60)
@given(content=jsonl_files(max_lines=10), cut=st.integers(min_value=1, max_value=200))
def test_a_truncated_gzip_stream_ends_with_one_error(content, cut):
    packed = gzipped(content)
    cut = min(cut, len(packed) - 1)
    results = _read(io.BytesIO(packed[:cut]))
    # whatever was read before the damage is as the oracle says; then at most one invalid_gzip, last
    gzip_errors = [r for r in results if isinstance(r, JsonlLineError) and r.code == "invalid_gzip"]
    assert len(gzip_errors) <= 1 and (not gzip_errors or results[-1] is gzip_errors[0])
    good = results[:-1] if gzip_errors else results
    expected = expect_file(content)
    assert [r.line for r in good] == [e.line for e in expected[: len(good)]]


@pytest.mark.parametrize("depth", [1_000, 5_000, 100_000])
@pytest.mark.parametrize("shape", ["array", "object", "in_record"])
def test_deep_nesting_is_one_invalid_json_error(depth, shape):
    if shape == "array":
        line = nested(depth)
    elif shape == "object":
        line = nested(depth, '{"a":', "}", "null")
    else:
        line = '{"id": "deep", "text": "x", "n": ' + nested(depth) + "}"
    content = b'{"id": "before", "text": "ok"}\n' + line.encode() + b'\n{"id": "after", "text": "ok"}\n'
    results = _read(io.BytesIO(content))
    assert [r.line for r in results] == [1, 2, 3]
    assert isinstance(results[1], JsonlLineError) and results[1].code == "invalid_json"
    assert "nested too deeply" in results[1].message
    assert [to_record(r, "id", "text").id for r in (results[0], results[2])] == ["before", "after"]
