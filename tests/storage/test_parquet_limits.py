"""A Parquet row is bounded while it is read: a row over the bound is its own error, never made
Python values; a row group whose footer declares a bomb's expansion is not read at all; a large
row group is read in batches sized from its footer, not a column at once."""
import io
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.object_stores import RangeCountingStore

from poolq.storage.input_limits import InputLimits
from poolq.storage.parquet_input import ParquetInput, ParquetRow, ParquetRowError
from poolq.storage.parquet_row_sizes import batch_rows, read_leaves

MIB = 1 << 20
LIMITS = InputLimits(max_record_bytes=MIB, origin=" (the test's bound)")


@pytest.fixture
def store(tmp_path):
    return RangeCountingStore(tmp_path)


def _put(store, tables: list[pa.Table], compression="zstd") -> ParquetInput:
    """One row group per table."""
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, tables[0].schema, compression=compression) as writer:
        for table in tables:
            writer.write_table(table)
    store.put("in.parquet", sink.getvalue())
    return ParquetInput(store, "in.parquet", store.stat("in.parquet").size, LIMITS)


def _summary(items) -> list[tuple]:
    return [(item.line, item.value["id"]) if isinstance(item, ParquetRow) else (item.line, item.code) for item in items]


def test_a_row_over_the_bound_is_its_own_error_and_its_batch_neighbours_are_read(store):
    texts = ["short"] * 3 + ["x" * (2 * MIB)] + ["short"] * 3  # incompressible enough: no bomb, read and refused
    parquet = _put(store, [pa.table({"id": [f"r{i}" for i in range(7)], "text": texts})], compression="none")
    items = list(parquet.rows([(0, 7)], ["id", "text"]))
    assert _summary(items) == [(1, "r0"), (2, "r1"), (3, "r2"), (4, "record_too_large"), (5, "r4"), (6, "r5"), (7, "r6")]
    assert items[3].message == (f"row 4: its cells, decoded, take {2 * MIB + 2} bytes; a record may take at most {MIB} bytes "
                                "(the test's bound); it was refused before becoming Python values")
    assert isinstance(items[3], ParquetRowError) and items[3].unit == "row"
    assert items[4].value == {"id": "r4", "text": "short"}


def test_a_nested_cell_over_the_bound_is_measured_too(store):
    vectors = [[0.5] * 4, [0.25] * (MIB // 4), [1.0]]  # a list<double> of 2 MiB in row 2
    table = pa.table({"id": ["a", "b", "c"], "text": ["x", "y", "z"], "vector": vectors})
    parquet = _put(store, [table], compression="none")
    items = list(parquet.rows([(0, 3)], ["id", "text", "vector"]))
    assert _summary(items) == [(1, "a"), (2, "record_too_large"), (3, "c")]
    assert items[2].value["vector"] == [1.0]


def test_a_row_group_declaring_a_bombs_expansion_is_not_read(store):
    small = pa.table({"id": ["a", "b"], "text": ["alpha", "beta"]})
    bomb = pa.table({"id": ["big"], "text": ["a" * (16 * MIB)]})  # zstd: 16 MiB from a few KB
    parquet = _put(store, [small, bomb, pa.table({"id": ["c"], "text": ["gamma"]})])
    chunk = parquet.file.metadata.row_group(1).column(1)
    first = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    store.reads.clear()
    items = list(parquet.rows([(0, 4)], ["id", "text"]))
    assert _summary(items) == [(1, "a"), (2, "b"), (3, "input_too_compressed"), (4, "c")]
    assert items[2].message.startswith(f"row 3: its row group declares column 'text' at {chunk.total_uncompressed_size} "
                                       f"bytes uncompressed from {chunk.total_compressed_size} compressed, more than 100")
    # not one byte of that row group's text was fetched
    assert not [(start, end) for start, end in store.reads if start < first + chunk.total_compressed_size and end > first]


def test_a_large_row_group_is_read_in_batches_sized_from_its_footer(store, monkeypatch):
    rows = 400
    table = pa.table({"id": [f"r{i}" for i in range(rows)], "text": [f"{i:06d}" + "z" * 100_000 for i in range(rows)]})
    parquet = _put(store, [table], compression="none")  # one row group of 40 MB
    sizes = []
    original = pq.ParquetFile.iter_batches

    def noted(self, batch_size, **kwargs):
        sizes.append(batch_size)
        return original(self, batch_size, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", noted)
    items = list(parquet.rows([(0, rows)], ["id", "text"]))
    metadata = parquet.file.metadata
    assert sizes == [batch_rows(metadata, 0, read_leaves(metadata, ["id", "text"]))] == [83]  # 8 MiB / ~100 KB
    assert [item.value["id"] for item in items] == [f"r{i}" for i in range(rows)]


def test_a_value_many_rows_name_stays_one_value_and_becomes_python_a_few_mib_at_a_time(store, monkeypatch):
    # A dictionary page holds this 512 KiB text once for 2,048 rows (as any writer's would): 5 KB of file, 1 GiB
    # decoded. Written from a dictionary, never held densely here; no Arrow schema is stored, so it reads as strings.
    shared = pa.DictionaryArray.from_arrays(pa.array(np.zeros(2048, dtype=np.int32)), pa.array(["s" * (512 << 10)]))
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": [f"r{i}" for i in range(2048)], "text": shared}), sink, compression="zstd",
                   store_schema=False)
    store.put("in.parquet", sink.getvalue())
    parquet = ParquetInput(store, "in.parquet", store.stat("in.parquet").size, LIMITS)
    assert parquet.file.schema_arrow.field("text").type == pa.string()
    batches = []
    original = pq.ParquetFile.iter_batches

    def noted(self, *args, **kwargs):
        for batch in original(self, *args, **kwargs):
            batches.append((batch.num_rows, batch.nbytes))
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", noted)
    tracemalloc.start()
    try:
        count = sum(1 for item in parquet.rows([(0, 2048)], ["id", "text"]) if item.value["text"] is not None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 2048 and store.stat("in.parquet").size < 16 << 10
    assert max(size for _, size in batches) < 2 * MIB, batches  # Arrow holds the text once per batch, not per row
    assert peak < 24 * MIB, f"Python values took {peak / MIB:.0f} MiB at their peak"  # slices of ~8 MiB


def test_a_list_that_run_lengths_make_huge_is_a_bomb_by_its_values(store):
    # 4M zeros in one row's list: a few KB of file, 32 MB decoded; the footer's uncompressed size does not say so
    zeros = pa.ListArray.from_arrays(pa.array([0, 0, 1 << 22, 1 << 22], pa.int32()), pa.array(np.zeros(1 << 22)))
    table = pa.table({"id": ["a", "bomb", "c"], "text": ["x", "y", "z"], "vector": zeros})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    store.put("in.parquet", sink.getvalue())
    limits = InputLimits(max_record_bytes=MIB, ratio_floor_bytes=4 * MIB)
    parquet = ParquetInput(store, "in.parquet", store.stat("in.parquet").size, limits)
    chunk = parquet.file.metadata.row_group(0).column(2)
    assert chunk.total_uncompressed_size < MIB and len(sink.getvalue()) < 64 << 10
    items = list(parquet.rows([(0, 3)], ["id", "text", "vector"]))
    assert {item.code for item in items} == {"input_too_compressed"}
    assert chunk.num_values == (1 << 22) + 2  # and the two empty lists' places
    assert items[1].message.startswith(f"row 2: its row group's column 'vector.list.element' holds {chunk.num_values} "
                                       f"values ({8 * chunk.num_values} bytes decoded) from {chunk.total_compressed_size} "
                                       "compressed, more than 100 times: a decompression bomb, not read")


def test_a_column_not_read_never_refuses_the_rows_whatever_its_name(store):
    # Given an unread column declaring 3 MiB from a few hundred bytes: a bomb, were it read
    for name in ("raw", "text.raw"):  # a flat column whose name is the text column's and a dot
        table = pa.table({"id": ["a", "b"], "text": ["one river", "two mills"], name: ["x" * (3 * MIB), None]})
        parquet = _put(store, [table])
        # When only id and text are read, both rows are read
        assert _summary(parquet.rows([(0, 2)], ["id", "text"])) == [(1, "a"), (2, "b")], name
        # (and reading that column refuses them: the bound is kept where it applies)
        assert _summary(parquet.rows([(0, 2)], ["id", name])) == [(1, "input_too_compressed"), (2, "input_too_compressed")]
