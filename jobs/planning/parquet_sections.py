"""A Parquet object's sections: runs of whole row groups, and their rows.

A section ends at the first row-group boundary past ``section_bytes`` of uncompressed data, so a
planning task reads whole row groups, one at a time (``storage/parquet_input.py``). Rows are
numbered in the object, whatever the section: a Parquet object knows where each row group
starts, so no section waits for the one before it to count its rows.
"""
from __future__ import annotations

from typing import Iterable, Iterator

from poolq.jobs.inputs.included_fields import arrow_field_type
from poolq.jobs.inputs.input_format import InputFormat
from poolq.jobs.inputs.input_section import InputSection
from poolq.storage import JsonlProgress, ObjectInfo, ObjectStore
from poolq.storage.input_limits import InputLimits
from poolq.storage.parquet_input import ParquetInput, ParquetRow, ParquetRowError, RowGroup


def require_parquet_columns(store: ObjectStore, key: str, info: ObjectInfo, names: Iterable[str]) -> None:
    """MissingColumnError (naming the column and the object) if the object lacks one of ``names``."""
    ParquetInput(store, key, info.size).require_columns(names)


def parquet_sections(store: ObjectStore, key: str, info: ObjectInfo, name: str | None,
                     section_bytes: int) -> list[InputSection]:
    runs: list[list[RowGroup]] = [[]]
    held = 0
    for group in ParquetInput(store, key, info.size).row_groups:
        if runs[-1] and held >= section_bytes:
            runs.append([])
            held = 0
        runs[-1].append(group)
        held += group.data_bytes
    whole = len(runs) == 1

    def section(run: list[RowGroup]) -> InputSection:
        start, end = (run[0].first_row, run[-1].end_row) if run else (0, 0)
        return InputSection(store.uri(key), info.version, name, start, end, whole, InputFormat.PARQUET.value,
                            sum(group.data_bytes for group in run))

    return [section(run) for run in runs]


def parquet_items(section: InputSection, store: ObjectStore, key: str, info: ObjectInfo, first_line: int,
                  progress: JsonlProgress | None, columns: Iterable[str] | None,
                  limits: InputLimits) -> Iterator[ParquetRow | ParquetRowError]:
    """The section's rows, with those of ``columns`` the object has, none held past ``limits``
    (``first_line`` is JSONL's: a row's number is its place in the object)."""
    parquet = ParquetInput(store, key, info.size, limits)
    names = parquet.schema.names if columns is None else columns
    yield from parquet.rows([(section.start, section.end)], names, progress)


def parquet_field_types(store: ObjectStore, key: str, info: ObjectInfo, names: Iterable[str]) -> dict[str, str]:
    """The carried fields' types as the object's schema has them (a column it lacks: none)."""
    types = ParquetInput(store, key, info.size).column_types(names)
    return {name: arrow_field_type(data_type) for name, data_type in types.items()}
