"""Which column chunks reading a Parquet object's columns reads (``read_leaves``), whatever its
columns are named, and a row's decoded bytes from data that does not hold together."""
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from poolq.storage.parquet_row_sizes import read_leaves, row_bytes


def _metadata(table: pa.Table) -> pq.FileMetaData:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata


def _paths(metadata: pq.FileMetaData, names: list[str]) -> list[str]:
    return [metadata.schema.column(index).path for index in read_leaves(metadata, names)]


def test_a_flat_column_named_like_a_nested_path_is_no_leaf_of_the_other():
    # Both flat "text.raw" and struct "text"'s child "raw" are the leaf path "text.raw"
    table = pa.table({"text": ["one"], "text.raw": ["x"], "t": [{"raw": "y"}], "t.raw": ["z"]})
    metadata = _metadata(table)
    assert read_leaves(metadata, ["text"]) == [0] and read_leaves(metadata, ["text.raw"]) == [1]
    assert read_leaves(metadata, ["t"]) == [2] and read_leaves(metadata, ["t.raw"]) == [3]


def test_a_nested_columns_leaves_are_all_its_own_in_schema_order():
    table = pa.table({
        "id": ["a"],
        "s": pa.array([{"a": 1, "b": {"c": "x", "d": [1.5]}}]),
        "m": pa.array([[("k", [1])]], pa.map_(pa.string(), pa.list_(pa.int64()))),
        "l": pa.array([[{"p": 1, "q": "r"}]]),
        "f": pa.array([[1, 2]], pa.list_(pa.int32(), 2)),
        "d": pa.array(["v"]).dictionary_encode(),
        "text": ["last"],
    })
    metadata = _metadata(table)
    assert _paths(metadata, ["s"]) == ["s.a", "s.b.c", "s.b.d.list.element"]
    assert _paths(metadata, ["m"]) == ["m.key_value.key", "m.key_value.value.list.element"]
    assert _paths(metadata, ["l"]) == ["l.list.element.p", "l.list.element.q"]
    assert _paths(metadata, ["f", "d", "text"]) == ["f.list.element", "d", "text"]
    assert read_leaves(metadata, ["nope"]) == []


def test_a_dictionary_index_past_its_entries_is_named_as_corrupt_data():
    broken = pa.DictionaryArray.from_arrays(pa.array([0, 5], pa.int32()), pa.array(["a", "b"]), safe=False)
    with pytest.raises(ValueError, match="a dictionary index outside its 2 entries: the column's data is corrupt"):
        row_bytes(pa.record_batch([broken], names=["text"]))
    # while a null names no entry, in a dictionary with none (an all-null column read as one)
    nulls = pa.DictionaryArray.from_arrays(pa.nulls(2, pa.int32()), pa.array([], pa.string()))
    assert row_bytes(pa.record_batch([nulls], names=["id"])).tolist() == [0, 0]
