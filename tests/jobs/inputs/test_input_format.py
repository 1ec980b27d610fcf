"""An input object's format, from its first bytes, then its name; a Parquet row's record and its
errors, which say ``row N`` and tell a null field from a missing one."""
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from poolq.jobs.inputs.input_format import INPUT_SUFFIXES, InputFormat, object_format, suffix_of, suffix_of_bytes
from poolq.jobs.inputs.records import InputRecord, RecordError, to_record
from poolq.storage import JsonlObject, LocalObjectStore
from poolq.storage.parquet_input import NotParquetError, ParquetRow


def _parquet_bytes() -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": [1], "text": ["x"]}), sink)
    return sink.getvalue()


@pytest.mark.parametrize("key, data, expected", [
    ("a.jsonl", None, InputFormat.PARQUET),  # the bytes decide first: an upload keyed .jsonl holding Parquet
    ("export.bin", None, InputFormat.PARQUET),
    ("a.jsonl.gz", b"\x1f\x8b", InputFormat.JSONL),  # gzip: JSONL, unpacked by the reader
    ("a.jsonl", b"PAR", InputFormat.JSONL),  # shorter than the magic
    ("export.txt", b'{"id": 1, "text": "x"}\n', InputFormat.JSONL),  # then the name, else JSONL
    ("empty", b"", InputFormat.JSONL),
])
def test_the_format_comes_from_the_magic_bytes_then_the_name(tmp_path, key, data, expected):
    store = LocalObjectStore(tmp_path)
    store.put(key, _parquet_bytes() if data is None else data)
    assert object_format(store, key, store.stat(key).size) is expected


@pytest.mark.parametrize("data, looks_like", [
    (b'{"id": "a", "text": "JSONL"}\n', "it looks like JSON lines: name it .jsonl"),
    (b"\x1f\x8b\x08\x00", "gzip: name it .jsonl.gz"),
    (b"", "this object with b''"),
])
def test_a_name_that_says_parquet_over_other_bytes_is_one_error_naming_the_object(tmp_path, data, looks_like):
    store = LocalObjectStore(tmp_path)
    store.put("corpus.parquet", data)
    with pytest.raises(NotParquetError) as caught:
        object_format(store, "corpus.parquet", len(data))
    message = str(caught.value)
    assert message.startswith(f"{store.uri('corpus.parquet')} is named as Parquet but is not: "
                              "a Parquet file starts with b'PAR1'") and looks_like in message, message


@pytest.mark.parametrize("name, suffix", [
    ("corpus.parquet", ".parquet"), ("c.jsonl.gz", ".jsonl.gz"), ("c.jsonl", ".jsonl"), ("c.txt", None), ("c.gz", None),
])
def test_an_input_ending_is_the_longest_that_fits(name, suffix):
    assert suffix_of(name) == suffix


@pytest.mark.parametrize("head, suffix", [(b"PAR1", ".parquet"), (b"\x1f\x8b\x08\x00", ".jsonl.gz"), (b"{\"id", None)])
def test_an_objects_first_bytes_say_parquet_or_gzip(head, suffix):
    assert suffix_of_bytes(head) == suffix


def test_a_prefix_lists_parquet_objects_beside_jsonl():
    assert set(INPUT_SUFFIXES) == {".jsonl", ".jsonl.gz", ".parquet"}


@pytest.mark.parametrize("value, code, message", [
    ({"id": 12, "text": None}, "missing_text", "row 7 (id '12'): field 'text' is null"),
    ({"id": 12}, "missing_text", "row 7 (id '12'): field 'text' is missing"),
    ({"id": None, "text": "x"}, "missing_id", "row 7: field 'id' is null"),
    ({"id": 1.5, "text": "x"}, "invalid_id", "row 7: field 'id' must be a string or integer"),
    ({"id": b"raw", "text": "x"}, "invalid_id", "row 7: field 'id' must be a string or integer"),
    ({"id": "a", "text": 3}, "invalid_text", "row 7 (id 'a'): field 'text' must be a string"),
    ({"id": "a", "text": ["x"]}, "invalid_text", "row 7 (id 'a'): field 'text' must be a string"),
])
def test_a_parquet_rows_errors_name_its_row(value, code, message):
    error = to_record(ParquetRow(7, value, 6, 1), "id", "text")
    assert isinstance(error, RecordError) and (error.code, error.message, error.line) == (code, message, 7)


def test_an_integer_id_becomes_its_text_and_the_record_counts_rows():
    record = to_record(ParquetRow(3, {"id": 9007199254740993, "text": "doc"}, 2, 1), "id", "text")
    assert isinstance(record, InputRecord) and (record.id, record.line, record.unit) == ("9007199254740993", 3, "row")


def test_jsonl_messages_still_say_line_and_a_json_null_is_null():
    error = to_record(JsonlObject(4, {"id": "a", "text": None}), "id", "text")
    assert error.message == "line 4 (id 'a'): field 'text' is null"
    assert to_record(JsonlObject(4, {"text": "x"}), "id", "text").message == "line 4: field 'id' is missing"
