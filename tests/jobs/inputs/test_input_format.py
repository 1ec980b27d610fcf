"""An input object's format, from its name or its first bytes; a Parquet row's record and its
errors, which say ``row N`` and tell a null field from a missing one."""
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from poolq.jobs.inputs.input_format import INPUT_SUFFIXES, InputFormat, object_format
from poolq.jobs.inputs.records import InputRecord, RecordError, to_record
from poolq.storage import JsonlObject, LocalObjectStore
from poolq.storage.parquet_input import ParquetRow


def _parquet_bytes() -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": [1], "text": ["x"]}), sink)
    return sink.getvalue()


@pytest.mark.parametrize("key, data, expected", [
    ("a.parquet", b"not even parquet", InputFormat.PARQUET),  # the name decides where it says
    ("a.jsonl", b"PAR1 looks like parquet", InputFormat.JSONL),
    ("a.jsonl.gz", b"\x1f\x8b", InputFormat.JSONL),
    ("export.bin", None, InputFormat.PARQUET),  # else the first bytes do
    ("export.txt", b'{"id": 1, "text": "x"}\n', InputFormat.JSONL),
    ("empty", b"", InputFormat.JSONL),
])
def test_the_format_comes_from_the_name_else_the_magic_bytes(tmp_path, key, data, expected):
    store = LocalObjectStore(tmp_path)
    store.put(key, _parquet_bytes() if data is None else data)
    assert object_format(store, key) is expected


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
