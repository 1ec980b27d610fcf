"""Reading a Parquet input object by row group through ranged reads: the rows asked for, numbered
in the object, with the columns asked for, and no byte of row groups that were not asked for."""
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.object_stores import RangeCountingStore

from poolq.storage.parquet_input import AmbiguousColumnError, MissingColumnError, NotParquetError, ParquetInput, is_parquet

ROWS = 50


@pytest.fixture
def store(tmp_path):
    return RangeCountingStore(tmp_path)


def _put(store, key, table, row_group_size):
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    store.put(key, sink.getvalue())
    return ParquetInput(store, key, store.stat(key).size)


def _table():
    return pa.table({"id": pa.array(range(ROWS), pa.int64()), "text": [f"text {i}" * 20 for i in range(ROWS)],
                     "extra": [i * 1.5 for i in range(ROWS)]})


def test_row_groups_cover_the_object_in_order(store):
    parquet = _put(store, "t.parquet", _table(), row_group_size=8)
    groups = parquet.row_groups
    assert [(g.first_row, g.rows) for g in groups] == [(i, min(8, ROWS - i)) for i in range(0, ROWS, 8)]
    assert parquet.num_rows == ROWS and all(g.data_bytes > 0 for g in groups)


@pytest.mark.parametrize("ranges", [[(0, ROWS)], [(3, 5)], [(7, 9), (15, 17), (40, 41)], [(0, 1), (49, 50)], [(10, 10)]])
def test_the_rows_of_the_ranges_come_numbered_in_the_object(store, ranges):
    parquet = _put(store, "t.parquet", _table(), row_group_size=8)
    rows = list(parquet.rows(ranges, ["id", "text"]))
    wanted = [i for start, end in ranges for i in range(start, end)]
    assert [row.offset for row in rows] == wanted and [row.line for row in rows] == [i + 1 for i in wanted]
    assert [row.value for row in rows] == [{"id": i, "text": f"text {i}" * 20} for i in wanted]
    assert all(row.unit == "row" and row.size == 1 for row in rows)


def test_only_the_row_groups_holding_the_rows_are_read(store):
    parquet = _put(store, "t.parquet", _table(), row_group_size=8)
    footer_reads = len(store.reads)
    list(parquet.rows([(17, 19)], ["id", "text"]))  # in the third row group, rows 16..23
    chunks = [parquet.file.metadata.row_group(2).column(i) for i in range(2)]
    wanted = [(c.data_page_offset if c.dictionary_page_offset is None else c.dictionary_page_offset,
               c.total_compressed_size) for c in chunks]
    low = min(start for start, _ in wanted)
    high = max(start + size for start, size in wanted)
    data_reads = store.reads[footer_reads:]
    assert data_reads and all(low <= start and end <= high for start, end in data_reads), (store.reads, wanted)


def test_absent_columns_are_no_keys_and_types_are_the_schemas(store):
    parquet = _put(store, "t.parquet", _table(), row_group_size=64)
    (row,) = parquet.rows([(2, 3)], ["id", "nope"])
    assert row.value == {"id": 2}
    assert parquet.column_types(["extra", "id", "nope"]) == {"extra": pa.float64(), "id": pa.int64()}


def test_values_python_cannot_hold_are_kept_as_arrow_scalars(store):
    # A nanosecond timestamp has no datetime; reading the batch must not fail for it
    table = pa.table({"id": ["a", "b"], "at": pa.array([1_700_000_000_123_456_789, None], pa.timestamp("ns"))})
    parquet = _put(store, "ns.parquet", table, row_group_size=10)
    first, second = parquet.rows([(0, 2)], ["id", "at"])
    assert first.value["id"] == "a" and isinstance(first.value["at"], pa.TimestampScalar)
    assert first.value["at"].value == 1_700_000_000_123_456_789 and second.value["at"] is None


def test_an_object_that_is_not_parquet_says_so(store):
    store.put("bad.parquet", b"PAR1 this is no footer")
    with pytest.raises(NotParquetError, match="bad.parquet cannot be read as Parquet"):
        ParquetInput(store, "bad.parquet", store.stat("bad.parquet").size)
    assert is_parquet(b"PAR1\x15\x04") and not is_parquet(b'{"id": 1}')


def _garbage_footer(store, key):
    """``key`` written whole, then its footer overwritten: magic bytes and footer length intact."""
    _put(store, key, _table(), row_group_size=64)
    raw = store.get(key)
    footer = int.from_bytes(raw[-8:-4], "little")
    store.put(key, raw[: len(raw) - 8 - footer] + b"\xff" * footer + raw[-8:])


def test_an_object_whose_footer_does_not_parse_says_so(store):
    # pyarrow raises OSError ("Couldn't deserialize thrift") for it, not ArrowInvalid
    _garbage_footer(store, "garbage.parquet")
    with pytest.raises(NotParquetError, match="garbage.parquet cannot be read as Parquet: OSError"):
        ParquetInput(store, "garbage.parquet", store.stat("garbage.parquet").size)


class _FailingStore(RangeCountingStore):
    def open_range(self, key, start, end):
        raise ConnectionError("the network is down")


def test_a_store_that_fails_while_the_footer_is_read_is_not_called_the_objects_fault(tmp_path):
    store = _FailingStore(tmp_path)
    _put(RangeCountingStore(tmp_path), "t.parquet", _table(), row_group_size=64)
    with pytest.raises(ConnectionError, match="the network is down"):
        ParquetInput(store, "t.parquet", store.stat("t.parquet").size)


def test_a_column_named_twice_is_ambiguous_not_missing(store):
    table = pa.Table.from_arrays([pa.array(["a"]), pa.array(["one"]), pa.array([1]), pa.array([2]), pa.array([3])],
                                 names=["id", "text", "n", "n", "n"])
    parquet = _put(store, "dup.parquet", table, row_group_size=64)
    with pytest.raises(AmbiguousColumnError, match=r"dup.parquet has 3 columns named 'n', which every row needs"):
        parquet.require_columns(["id", "text", "n"])
    with pytest.raises(AmbiguousColumnError, match=r"dup.parquet has 3 columns named 'n', which is carried"):
        parquet.column_types(["text", "n"])
    assert issubclass(AmbiguousColumnError, MissingColumnError)  # fails the job (and an estimate) as a missing one does
    assert parquet.column_types(["text", "nope"]) == {"text": pa.string()}
