"""The columns every output part has, whatever the task: who the row is, what it cost, where a
chunk row comes from. Each task's row format (``parquet.py``, ``sparse_rows.py``,
``classify_rows.py``) adds its value columns between ``id`` and ``num_tokens``."""
from __future__ import annotations

import io
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from poolq.storage.object_store import ObjectStore

CHUNK_COLUMNS = ("chunk_index", "token_start", "token_end", "char_start", "char_end")
SPLIT_COLUMN = "split"  # chunk rows: a piece of a chunk longer than the window
ChunkValues = tuple[int, int, int, int, int]  # one CHUNK_COLUMNS tuple


def part_schema(value_fields: list[pa.Field], with_chunks: bool, included: list[pa.Field] | None = None) -> pa.Schema:
    """id, the task's value columns, num_tokens, truncated, content_hash; chunk rows add where each
    chunk comes from; then the input fields carried into every row (``included``, nullable).
    ``content_hash`` is null only in rows appended without one (parts written by poolq always have it)."""
    fields = [
        pa.field("id", pa.string(), nullable=False), *value_fields,
        pa.field("num_tokens", pa.int32(), nullable=False),
        pa.field("truncated", pa.bool_(), nullable=False),
        pa.field("content_hash", pa.string(), nullable=True),
    ]
    if with_chunks:
        fields += [pa.field(name, pa.int32(), nullable=False) for name in CHUNK_COLUMNS]
        fields.append(pa.field(SPLIT_COLUMN, pa.bool_(), nullable=False))
    return pa.schema([*fields, *(included or [])])


@dataclass
class RowColumns(ABC):
    """Column buffers for one Parquet part: the common columns here, the values in subclasses."""

    with_chunks: bool = False
    ids: list[str] = field(default_factory=list)
    num_tokens: list[int] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)
    chunk_values: list[ChunkValues] = field(default_factory=list)
    chunk_split: list[bool] = field(default_factory=list)  # and its SPLIT_COLUMN
    content_hashes: list[str | None] = field(default_factory=list)
    included_types: dict[str, pa.DataType] = field(default_factory=dict)  # carried input fields, in column order
    included_values: dict[str, list] = field(default_factory=dict)

    @abstractmethod
    def value_fields(self) -> list[pa.Field]: ...

    def include_columns(self, types: dict[str, pa.DataType]) -> None:
        """Carry these input fields (name -> Arrow type) in every row, after the common columns."""
        self.included_types = dict(types)
        self.included_values = {name: [] for name in types}

    def append_included(self, values: dict[str, object]) -> None:
        """The last appended row's carried fields (a missing one is null)."""
        for name, column in self.included_values.items():
            column.append(values.get(name))

    def _included_fields(self) -> list[pa.Field]:
        return [pa.field(name, data_type, nullable=True) for name, data_type in self.included_types.items()]

    @abstractmethod
    def value_arrays(self) -> list[pa.Array]: ...

    def schema(self) -> pa.Schema:
        return part_schema(self.value_fields(), self.with_chunks, self._included_fields())

    def append_row(self, record_id: str, num_tokens: int, truncated: bool, chunk: ChunkValues | None,
                   content_hash: str | None, split: bool) -> None:
        """The common columns of one row; a subclass appends its values first (they may refuse it)."""
        if (chunk is not None) != self.with_chunks:
            raise ValueError(f"record {record_id!r}: chunk columns {'missing' if self.with_chunks else 'unexpected'}")
        self.ids.append(record_id)
        self.num_tokens.append(num_tokens)
        self.truncated.append(truncated)
        self.content_hashes.append(content_hash)
        if chunk is not None:
            self.chunk_values.append(chunk)
            self.chunk_split.append(split)

    def __len__(self) -> int:
        return len(self.ids)

    def to_table(self) -> pa.Table:
        columns: list[Any] = [
            pa.array(self.ids, pa.string()), *self.value_arrays(), pa.array(self.num_tokens, pa.int32()),
            pa.array(self.truncated, pa.bool_()), pa.array(self.content_hashes, pa.string()),
        ]
        if self.with_chunks:
            by_column = list(zip(*self.chunk_values)) if self.chunk_values else [()] * len(CHUNK_COLUMNS)
            columns += [pa.array(values, pa.int32()) for values in by_column]
            columns.append(pa.array(self.chunk_split, pa.bool_()))
        columns += [pa.array(self.included_values[name], data_type) for name, data_type in self.included_types.items()]
        return pa.Table.from_arrays(columns, schema=self.schema())

    def to_parquet_bytes(self) -> bytes:
        return write_part(self.to_table())


_PLAIN_NAMES = {"float": "float32", "halffloat": "float16", "double": "float64"}


def type_name(data_type: pa.DataType) -> str:
    """An Arrow type as the manifest and README write it: ``list<float32>``,
    ``fixed_size_list<int8>[384]`` (no child field names, which Parquet round trips rename)."""
    if pa.types.is_fixed_size_list(data_type):
        return f"fixed_size_list<{type_name(data_type.value_type)}>[{data_type.list_size}]"
    if pa.types.is_list(data_type):
        return f"list<{type_name(data_type.value_type)}>"
    if pa.types.is_fixed_size_binary(data_type):
        return f"fixed_size_binary[{data_type.byte_width}]"
    name = str(data_type)
    return _PLAIN_NAMES.get(name, name)


def list_array(rows: list[np.ndarray], value_type: pa.DataType, dtype: type) -> pa.Array:
    """One ``list<value_type>`` array from per-row numpy arrays, without a Python list per value."""
    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum([len(row) for row in rows], out=offsets[1:])
    flat: np.ndarray = np.concatenate(rows).astype(dtype, copy=False) if rows else np.zeros(0, dtype=dtype)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, value_type))


def write_part(table: pa.Table) -> bytes:
    """Serialize a part's table (e.g. rows filtered out of an earlier part) as one Parquet object.

    Dictionary pages and min/max statistics only for the flat columns (ids, counts, hashes, carried
    fields), not for vectors (lists, and bit-packed ``fixed_size_binary``): a vector's values are
    nearly all distinct, so a dictionary of them is built, found too large and dropped, and their
    statistics prune nothing. Both took half the write's time (4,096 MiniLM rows: 29 -> 14 ms), and
    the dictionary attempt left the vector column larger than plain values under zstd (-9 %)."""
    flat = [column.name for column in table.schema if not _holds_vectors(column.type)]
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", use_dictionary=flat, write_statistics=flat)
    return sink.getvalue()


def _holds_vectors(data_type: pa.DataType) -> bool:
    return pa.types.is_nested(data_type) or pa.types.is_fixed_size_binary(data_type)


_FOOTER_READ = 1 << 16  # bytes read from a part's end for its schema (more if the footer is larger)


def read_part_schema(store: "ObjectStore", key: str) -> pa.Schema:
    """A stored part's schema, from its Parquet footer alone (two ranged reads at most)."""
    size = store.stat(key).size
    with store.open_range(key, max(0, size - _FOOTER_READ), size) as stream:
        tail = stream.read()
    footer = int.from_bytes(tail[-8:-4], "little") + 8  # metadata, its length, "PAR1"
    if footer > len(tail):
        with store.open_range(key, size - footer, size) as stream:
            tail = stream.read()
    return pq.read_schema(io.BytesIO(b"PAR1" + tail[-footer:]))


def read_part(data: bytes, columns: list[str] | None = None) -> pa.Table:
    """Read a part; with ``columns``, only those of them it has (parts written before
    ``content_hash`` existed lack it)."""
    source = pq.ParquetFile(io.BytesIO(data))
    if columns is not None:
        columns = [name for name in columns if name in source.schema_arrow.names]
    return source.read(columns=columns)


# Parts of every task are read and written the same way; the embed names came first.
read_embeddings = read_part
write_embeddings = write_part
