"""A part's Parquet: vectors as plain values, the flat columns with dictionaries and statistics."""
import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from poolq.storage import write_part
from poolq.storage.row_columns import list_array


def _table(rows: int = 300, dims: int = 32) -> pa.Table:
    vectors = np.random.default_rng(3).standard_normal((rows, dims)).astype(np.float32)
    return pa.table({
        "id": pa.array([f"doc-{i % 7}" for i in range(rows)]),
        "embedding": list_array(list(vectors), pa.float32(), np.float32),
        "bits": pa.array([row.tobytes()[:4] for row in vectors], pa.binary(4)),  # a bit-packed vector
        "num_tokens": pa.array(np.arange(rows, dtype=np.int32)),
    })


def _chunk(part: bytes, path: str) -> pq.ColumnChunkMetaData:
    row_group = pq.ParquetFile(io.BytesIO(part)).metadata.row_group(0)
    return next(row_group.column(i) for i in range(row_group.num_columns) if row_group.column(i).path_in_schema == path)


def test_a_part_reads_back_as_written():
    table = _table()
    assert pq.read_table(io.BytesIO(write_part(table))).equals(table)


def test_vector_values_get_neither_a_dictionary_nor_statistics_and_flat_columns_get_both():
    part = write_part(_table())
    for path in ("embedding.list.element", "bits"):
        vector = _chunk(part, path)
        assert not {"PLAIN_DICTIONARY", "RLE_DICTIONARY"} & set(vector.encodings), path
        assert vector.statistics is None or not vector.statistics.has_min_max, path
    for flat in ("id", "num_tokens"):
        chunk = _chunk(part, flat)
        assert chunk.statistics is not None and chunk.statistics.has_min_max
        assert {"PLAIN_DICTIONARY", "RLE_DICTIONARY"} & set(chunk.encodings)
    assert _chunk(part, "embedding.list.element").compression == "ZSTD"
