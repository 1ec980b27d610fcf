import numpy as np
import pyarrow as pa
import pytest

from poolq.jobs.tasks.rows import EmbeddingRows
from poolq.storage import read_embeddings


def test_writes_the_documented_columns_and_types():
    rows = EmbeddingRows(dimensions=3)
    rows.append("a", np.array([1, 2, 3], dtype=np.float32), 12, False)
    rows.append("b", np.array([4, 5, 6], dtype=np.float64), 700, True)
    table = read_embeddings(rows.to_parquet_bytes())
    assert table.schema.field("id").type == pa.string()
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), 3)
    assert table.schema.field("num_tokens").type == pa.int32()
    assert table.schema.field("truncated").type == pa.bool_()
    assert table.column("id").to_pylist() == ["a", "b"]
    np.testing.assert_array_equal(np.stack(table.column("embedding").to_numpy(zero_copy_only=False)), [[1, 2, 3], [4, 5, 6]])
    assert table.column("truncated").to_pylist() == [False, True]


def test_rejects_a_vector_of_the_wrong_size():
    with pytest.raises(ValueError, match="record 'x'"):
        EmbeddingRows(dimensions=3).append("x", np.zeros(4, dtype=np.float32), 1, False)
