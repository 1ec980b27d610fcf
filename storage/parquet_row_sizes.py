"""How large a Parquet input's rows are, before and while they are read (what ``parquet_input.py`` bounds).

A Parquet file can decode to far more than its bytes, and more than its footer's sizes: a
dictionary page holds a value once for every row that names it, run-length encoding repeats a
value (or a list's elements) for free, and a compression codec expands pages. So:

- **before a row group is read**, its footer says, per column chunk, the bytes it holds
  (compressed, uncompressed) and its values; a chunk that would expand past the floor at more
  than the ratio (``InputLimits``) is a bomb, and its row group is not read. Batches are sized
  from the same figures (a large row group is never read a whole column at once).
- **string and binary columns are read as dictionaries** (``read_dictionary``): a value named
  by a thousand rows stays one value in Arrow memory.
- **each row's decoded bytes** come from the arrays (offsets, dictionary entries' lengths taken
  by index, list lengths) without a copy, before any of it becomes Python values: a row over the
  bound is refused as Arrow data, and the rest become Python values a few MiB at a time.

pyarrow decodes a page whole: a cell is held once as its page, which writers make no larger
than its largest value, and a chunk declaring more than the bound at a bomb's ratio is refused
before that.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from poolq.storage.input_limits import InputLimits

MAX_BATCH_ROWS = 4096  # rows decoded at a time
CONVERT_BYTES = 8 << 20  # decoded bytes per batch, and per slice of rows turned into Python values
# Bytes per value once decoded, by physical type (a string's: its offset, or its dictionary index)
_WIDTHS = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 4}
# An encoding whose values can decode to more than the footer says, where no dictionary can hold them
_EXPANDING = "DELTA_BYTE_ARRAY"  # each value is a prefix of the one before plus a suffix
# Arrow's list types: each is one Parquet list, whose elements are its leaves
_LISTS = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list, pa.types.is_list_view,
          pa.types.is_large_list_view)


def read_leaves(metadata: pq.FileMetaData, names: list[str]) -> list[int]:
    """The column chunks (leaf columns) of the top-level columns ``names``: what reading them reads.

    Leaves are counted column by column down the Arrow schema, in the order Parquet stores them:
    a dotted path cannot say which column a leaf is of (a flat column named ``text.raw`` and a
    struct ``text``'s child ``raw`` are both ``text.raw``)."""
    wanted, first = set(names), 0
    leaves: list[int] = []
    for field in metadata.schema.to_arrow_schema():
        count = _leaf_count(field.type)
        if field.name in wanted:
            leaves += range(first, first + count)
        first += count
    if first != len(metadata.schema):  # not as Parquet stores it: bound every chunk rather than guess
        return list(range(len(metadata.schema)))
    return leaves


def _leaf_count(kind: pa.DataType) -> int:
    """How many Parquet leaves a column of Arrow type ``kind`` is stored as."""
    if isinstance(kind, pa.ExtensionType):
        return _leaf_count(kind.storage_type)
    if pa.types.is_dictionary(kind):
        return _leaf_count(kind.value_type)
    if pa.types.is_map(kind):
        return _leaf_count(kind.key_type) + _leaf_count(kind.item_type)
    if any(is_list(kind) for is_list in _LISTS):
        return _leaf_count(kind.value_type)
    if pa.types.is_struct(kind):
        return sum(_leaf_count(kind.field(index).type) for index in range(kind.num_fields))
    return 1


def byte_array_paths(metadata: pq.FileMetaData, leaves: list[int]) -> list[str]:
    """The leaves of string or binary values: what is read as dictionaries."""
    schema = metadata.schema
    return [schema.column(index).path for index in leaves if schema.column(index).physical_type == "BYTE_ARRAY"]


def _width(metadata: pq.FileMetaData, index: int) -> int:
    column = metadata.schema.column(index)
    return _WIDTHS.get(column.physical_type, max(1, column.length or 0))  # FIXED_LEN_BYTE_ARRAY: its length


def _decoded(metadata: pq.FileMetaData, chunk: pq.ColumnChunkMetaData, index: int) -> int:
    """At least what the chunk decodes to: its uncompressed bytes, and its values at their width."""
    return max(chunk.total_uncompressed_size, chunk.num_values * _width(metadata, index))


def batch_rows(metadata: pq.FileMetaData, group: int, leaves: list[int]) -> int:
    """Rows per batch: about CONVERT_BYTES of the row group's decoded data by its footer, 1 to
    MAX_BATCH_ROWS; one where an expanding encoding makes the footer no bound."""
    row_group = metadata.row_group(group)
    chunks = [(row_group.column(index), index) for index in leaves]
    if any(_EXPANDING in chunk.encodings for chunk, _ in chunks):
        return 1
    per_row = max(1, sum(_decoded(metadata, chunk, index) for chunk, index in chunks) // max(1, row_group.num_rows))
    return max(1, min(MAX_BATCH_ROWS, CONVERT_BYTES // per_row))


def bomb_column(metadata: pq.FileMetaData, group: int, leaves: list[int], limits: InputLimits) -> str | None:
    """Why the row group is not read (a column chunk that would expand too far), or None."""
    row_group = metadata.row_group(group)
    for index in leaves:
        chunk = row_group.column(index)
        uncompressed, compressed, decoded = chunk.total_uncompressed_size, chunk.total_compressed_size, _decoded(
            metadata, chunk, index)
        if limits.chunk_bomb(uncompressed, compressed):
            return (f"its row group declares column {chunk.path_in_schema!r} at {uncompressed} bytes uncompressed from "
                    f"{compressed} compressed, more than {limits.max_compression_ratio} times and more than a record "
                    f"may take ({limits.max_record_bytes}): a decompression bomb, not read")
        if limits.expands_too_far(decoded, compressed):  # run lengths: values that cost no bytes, as a gzip bomb
            return (f"its row group's column {chunk.path_in_schema!r} holds {chunk.num_values} values ({decoded} bytes "
                    f"decoded) from {compressed} compressed, more than {limits.max_compression_ratio} times: a "
                    "decompression bomb, not read")
    return None


def row_bytes(batch: pa.RecordBatch) -> np.ndarray:
    """Each row's bytes in ``batch`` once decoded (a dictionary's value counted for each row naming
    it, a list's elements summed), from the arrays' offsets and lengths: no value is copied."""
    sizes = np.zeros(batch.num_rows, dtype=np.int64)
    for column in batch.columns:
        sizes += _sizes(column)
    return sizes


def _sizes(array: pa.Array) -> np.ndarray:
    """Decoded bytes of each of ``array``'s values (0 for a null)."""
    kind = array.type
    if pa.types.is_dictionary(kind):
        entries = _sizes(array.dictionary)
        indices, valid = array.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), _valid(array)
        named = indices[valid]  # a null names no entry (an all-null column's dictionary has none)
        if len(named) and not 0 <= named.min() <= named.max() < len(entries):  # numpy's IndexError says not what
            raise ValueError(f"a dictionary index outside its {len(entries)} entries: the column's data is corrupt")
        return np.where(valid, entries[indices] if len(entries) else 0, 0)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return pc.binary_length(array).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_map(kind):  # a list of key-value pairs; keys and items are the whole child, as offsets count
        return _per_list(array, _sizes(array.keys) + _sizes(array.items) + 16)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _per_list(array, _sizes(array.values) + 8)  # and a reference to each element
    if pa.types.is_fixed_size_list(kind):
        width = kind.list_size
        elements = _sizes(array.values.slice(array.offset * width, len(array) * width)) + 8
        return np.where(_valid(array), elements.reshape(len(array), width).sum(axis=1), 0)
    if pa.types.is_struct(kind):
        fields = array.flatten()  # each field as sliced with the array
        return sum((_sizes(field) for field in fields), np.zeros(len(array), dtype=np.int64))
    if isinstance(array, pa.ExtensionArray):
        return _sizes(array.storage)
    if pa.types.is_fixed_size_binary(kind):
        width = kind.byte_width
    else:
        width = max(1, kind.bit_width // 8) if pa.types.is_primitive(kind) or pa.types.is_decimal(kind) else 8
    return np.where(_valid(array), width, 0)


def _per_list(array: pa.Array, elements: np.ndarray) -> np.ndarray:
    """Each list's total of its ``elements`` (sizes over the whole child, which a slice's offsets index)."""
    offsets = array.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    totals = np.concatenate(([0], np.cumsum(elements)))
    return np.where(_valid(array), totals[offsets[1:]] - totals[offsets[:-1]], 0)


def _valid(array: pa.Array) -> np.ndarray:
    return array.is_valid().to_numpy(zero_copy_only=False)


def convert_slices(sizes: np.ndarray, over: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` runs of rows to turn into Python values together: about CONVERT_BYTES of
    the rows kept (a refused row counts nothing), at least one row each."""
    kept = np.where(over, 0, sizes)
    if int(kept.sum()) <= CONVERT_BYTES:  # the common case: the whole batch at once
        return [(0, len(sizes))]
    slices, start, held = [], 0, 0
    for row, size in enumerate(kept):
        if held and held + size > CONVERT_BYTES:
            slices.append((start, row))
            start, held = row, 0
        held += int(size)
    if start < len(sizes):
        slices.append((start, len(sizes)))
    return slices
