"""Reading a Parquet input object by row group, through ranged reads of the store.

pyarrow reads the footer, then only the column chunks of the row groups and columns asked for,
each through a ranged GET (``ObjectStore.open_range``): the object is never fetched whole, and
what is held at a time is one row group's chunks of those columns (streamed page by page within
``_READ_BUFFER``) plus one batch of rows as Python values. A row comes out shaped like a JSONL
line (``ParquetRow``), so planning and shards treat both formats alike: its ``line`` is its
1-based row number in the object and its ``offset`` its row index, so a shard names row ranges.
With ``InputLimits`` (an untrusted input's), string columns are read as dictionaries, batches are
sized from the footer, and a row over the bound, or every row of a row group that would expand
like a bomb, is a ``ParquetRowError`` instead, never made Python values (``parquet_row_sizes.py``).
"""
from __future__ import annotations

import io
import itertools
from dataclasses import dataclass
from typing import ClassVar, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from poolq.storage.input_limits import INPUT_TOO_COMPRESSED, RECORD_TOO_LARGE, InputLimits
from poolq.storage.jsonl import JsonlLineError, JsonlObject, JsonlProgress
from poolq.storage.object_store import ObjectStore
from poolq.storage.parquet_row_sizes import (
    MAX_BATCH_ROWS,
    batch_rows,
    bomb_column,
    byte_array_paths,
    convert_slices,
    read_leaves,
    row_bytes,
)

PARQUET_MAGIC = b"PAR1"  # the first (and last) four bytes of every Parquet file
_READ_BUFFER = 1 << 20  # bytes per ranged read inside a column chunk (pyarrow's buffered stream)

RowRange = tuple[int, int]  # row indices [start, end) of one object


@dataclass(frozen=True)
class ParquetRow(JsonlObject):
    """One row: ``value`` holds the columns that were read (an absent column is no key)."""

    unit: ClassVar[str] = "row"


@dataclass(frozen=True)
class ParquetRowError(JsonlLineError):
    """One row refused before it was made Python values (``record_too_large``, ``input_too_compressed``)."""

    unit: ClassVar[str] = "row"


@dataclass(frozen=True)
class _Refused:
    """A row not made Python values: its error's code and message, after ``row N: ``."""

    code: str
    detail: str


@dataclass(frozen=True)
class RowGroup:
    index: int
    first_row: int  # the row index of its first row in the object
    rows: int
    data_bytes: int  # uncompressed: what planning sizes sections by, as it sizes JSONL by bytes

    @property
    def end_row(self) -> int:
        return self.first_row + self.rows


class ParquetInput:
    """One Parquet object of a store, opened by its footer (a ranged read or two)."""

    def __init__(self, store: ObjectStore, key: str, size: int, limits: InputLimits | None = None) -> None:
        self.uri = store.uri(key)
        self.limits = limits
        self._source = (store, key, size)
        reader = _RangedReader(store, key, size)
        try:
            self.file = pq.ParquetFile(reader, buffer_size=_READ_BUFFER, pre_buffer=False)
            self.schema = self.file.schema_arrow
        # A footer that does not parse raises ArrowInvalid, or OSError ("Couldn't deserialize thrift")
        except (pa.ArrowException, OSError) as exc:
            if reader.failure is not None:  # the store's own failure (the network), not the object's bytes
                raise
            raise NotParquetError(f"{self.uri} cannot be read as Parquet: {type(exc).__name__}: {exc}") from exc
        metadata = self.file.metadata
        groups, first = [], 0
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            groups.append(RowGroup(index, first, group.num_rows, group.total_byte_size))
            first += group.num_rows
        self.row_groups: list[RowGroup] = groups
        self.num_rows = first

    def require_columns(self, names: Iterable[str]) -> None:
        """MissingColumnError naming the object and the first of ``names`` it has no column of;
        AmbiguousColumnError for one that more than one of its columns is named."""
        schema = self.schema
        for name in names:
            if self._field(name, "every row needs") is None:
                raise MissingColumnError(f"{self.uri} has no column {name!r}, which every row needs (its columns: "
                                         f"{', '.join(map(repr, schema.names[:20]))}{', ...' if len(schema.names) > 20 else ''})")

    def column_types(self, names: Iterable[str]) -> dict[str, pa.DataType]:
        """The Arrow types of those of ``names`` that are top-level columns of the object
        (AmbiguousColumnError for one that more than one of its columns is named)."""
        fields = {name: self._field(name, "is carried into every output row") for name in names}
        return {name: field.type for name, field in fields.items() if field is not None}

    def _field(self, name: str, use: str) -> pa.Field | None:
        """The one top-level column named ``name``, or None; ``use``: why the job reads it, for the error."""
        indices = self.schema.get_all_field_indices(name)
        if len(indices) > 1:  # pyarrow's get_field_index says -1, as for no column at all
            raise AmbiguousColumnError(f"{self.uri} has {len(indices)} columns named {name!r}, which {use}: "
                                       "it must name one column (rename or drop the others)")
        return self.schema.field(indices[0]) if indices else None

    def rows(self, ranges: list[RowRange], columns: Iterable[str],
             progress: JsonlProgress | None = None) -> Iterator[ParquetRow | ParquetRowError]:
        """The rows in ``ranges`` (sorted, not overlapping), with those of ``columns`` the object has.

        Each row group holding some of them is read once, from its first row to the last one
        wanted (row groups are the unit pyarrow can enter a column chunk at)."""
        present = [name for name in dict.fromkeys(columns) if name in self.schema.names]
        pending = [(start, end) for start, end in ranges if end > start]
        for group in self.row_groups:
            if not pending:
                return
            if pending[0][0] >= group.end_row:
                continue
            yield from self._group_rows(group, pending, present, progress)
            pending = [(max(start, group.end_row), end) for start, end in pending if end > group.end_row]

    def _group_rows(self, group: RowGroup, pending: list[RowRange], columns: list[str],
                    progress: JsonlProgress | None) -> Iterator[ParquetRow | ParquetRowError]:
        last = min(group.end_row, pending[-1][1])
        ranges = iter(pending)
        start, end = next(ranges)
        index = group.first_row
        for value in self._group_values(group, columns):
            if index >= last:
                return
            while index >= end:  # a range before ``last`` ends past ``index``: never exhausted
                start, end = next(ranges)
            if index >= start:
                if progress is not None:
                    progress.lines += 1
                yield (ParquetRowError(index + 1, value.code, f"row {index + 1}: {value.detail}")
                       if isinstance(value, _Refused) else ParquetRow(index + 1, value, index, 1))
            index += 1

    def _group_values(self, group: RowGroup, columns: list[str]) -> Iterator[dict | _Refused]:
        """The row group's rows from its first: Python values, or why a row was refused unread."""
        limits = self.limits
        if limits is None:
            batches = self.file.iter_batches(MAX_BATCH_ROWS, row_groups=[group.index], columns=columns, use_threads=False)
            for batch in batches:
                yield from _python_rows(batch)
            return
        metadata = self.file.metadata
        leaves = read_leaves(metadata, columns)
        if (bomb := bomb_column(metadata, group.index, leaves, limits)) is not None:
            yield from itertools.repeat(_Refused(INPUT_TOO_COMPRESSED, bomb), group.rows)
            return
        reader = self._dictionary_reader(byte_array_paths(metadata, leaves))
        size = batch_rows(metadata, group.index, leaves)
        for batch in reader.iter_batches(size, row_groups=[group.index], columns=columns, use_threads=False):
            yield from _bounded_rows(batch, limits)

    def _dictionary_reader(self, paths: list[str]) -> pq.ParquetFile:
        """The object again, its string leaves ``paths`` read as dictionaries (the footer is not read again)."""
        return pq.ParquetFile(_RangedReader(*self._source), buffer_size=_READ_BUFFER, pre_buffer=False,
                              metadata=self.file.metadata, read_dictionary=paths or None)


def _bounded_rows(batch: pa.RecordBatch, limits: InputLimits) -> Iterator[dict | _Refused]:
    """The batch's rows as Python values a few MiB at a time, but a row over the bound as its refusal."""
    sizes = row_bytes(batch)
    over = sizes > limits.max_record_bytes
    for start, end in convert_slices(sizes, over):
        refused = over[start:end]
        piece = batch.slice(start, end - start)
        if not refused.any():
            yield from _python_rows(piece)
            continue
        kept = _python_rows(piece.filter(pa.array(~refused)))
        for size, too_large in zip(sizes[start:end], refused):
            if too_large:
                detail = limits.too_large(int(size), "its cells, decoded, take")
                yield _Refused(RECORD_TOO_LARGE, f"{detail}; it was refused before becoming Python values")
            else:
                yield next(kept)


def _python_rows(batch: pa.RecordBatch) -> Iterator[dict]:
    """The batch's rows as dicts of Python values."""
    names = batch.schema.names
    for values in zip(*(python_values(column) for column in batch.columns)):
        yield dict(zip(names, values))


def python_values(column: pa.Array | pa.ChunkedArray) -> list:
    """A column's values in Python; where Python has no type for them (nanosecond timestamps and
    durations: a datetime stops at microseconds) they stay Arrow scalars, which the output's
    writer takes back as they are, rather than failing the batch or losing the nanoseconds."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):  # read as one (or written so): its values, not its indices
        column = column.dictionary_decode()
    try:
        return column.to_pylist()
    except (ValueError, OverflowError, pa.ArrowException):
        return [value if value.is_valid else None for value in column]


class MissingColumnError(ValueError):
    """A Parquet object lacks a column its every row must have (the job's id or text column):
    the object fails once, not each of its rows."""


class AmbiguousColumnError(MissingColumnError):
    """More than one column of a Parquet object has the name of a column the job reads: it has no
    one column of that name, and fails as an object without it does (once, naming it)."""


class NotParquetError(ValueError):
    """The object is named or marked as Parquet, but its footer cannot be read."""


def is_parquet(head: bytes) -> bool:
    """The first bytes of an object say it is Parquet."""
    return head[: len(PARQUET_MAGIC)] == PARQUET_MAGIC


class _RangedReader(io.RawIOBase):
    """A seekable reader over one object: every read is a ranged GET of exactly what is asked."""

    def __init__(self, store: ObjectStore, key: str, size: int) -> None:
        super().__init__()
        self.store, self.key, self.size = store, key, size
        self.position = 0
        self.failure: Exception | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def read(self, size: int | None = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self.position + size)
        if end <= self.position:
            return b""
        try:
            with self.store.open_range(self.key, self.position, end) as stream:
                data = stream.read()
        except Exception as exc:
            self.failure = exc  # pyarrow raises it again as it is: ParquetInput must not call it the bytes' fault
            raise
        self.position += len(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
