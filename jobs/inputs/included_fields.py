"""Input fields carried into every output row (``output.include_fields``): their types.

A field's type is decided once per job, in input order, by the earliest section that has one:
a Parquet object's column has its Arrow type in the schema (``arrow_field_type``: int32,
timestamp, list<string> are carried as such); a JSONL object's field gets the JSON type of its
first non-null value. A record whose value has another type is a per-record error (an integer is
a valid ``number``; an Arrow column takes what converts to its type); a missing field is null.
Nested JSON values (objects, arrays) are carried as their JSON text.
"""
from __future__ import annotations

import base64
import json
from functools import lru_cache
from typing import Literal

import pyarrow as pa

from poolq.storage import type_name

FieldType = Literal["string", "integer", "number", "boolean", "json"]
ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_(), "json": pa.string(),
}
# The carried fields of one record, as JSON: more is a per-record error (they sit in every row).
MAX_INCLUDED_BYTES = 64 << 10


_ARROW = "arrow:"  # then a one-field Arrow schema, IPC-serialized and base64'd: any Arrow type, exactly


def json_type(value: object) -> str | None:
    """The field type of one JSON value; None for null. A value no JSON holds (a Parquet
    timestamp, bytes, a decimal) is named by its Python type, which no JSON type accepts."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (dict, list)):
        return "json"
    return type(value).__name__


def arrow_field_type(data_type: pa.DataType) -> str:
    """A Parquet column's Arrow type as a job's field type."""
    schema = pa.schema([pa.field("value", data_type)])
    return _ARROW + base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def is_arrow_type(field_type: str) -> bool:
    return field_type.startswith(_ARROW)


@lru_cache(maxsize=256)  # looked up for every record checked or written
def arrow_type(field_type: str) -> pa.DataType:
    """The Arrow type of a column of ``field_type`` (a JSON type name or ``arrow_field_type``)."""
    if not is_arrow_type(field_type):
        return ARROW_TYPES[field_type]
    raw = base64.b64decode(field_type.removeprefix(_ARROW))
    return pa.ipc.read_schema(pa.py_buffer(raw)).field(0).type


def type_label(field_type: str) -> str:
    """A field type as messages write it: ``integer``, ``timestamp[us]``, ``list<string>``."""
    return type_name(arrow_type(field_type)) if is_arrow_type(field_type) else field_type


def accepts(field_type: str, value: object) -> bool:
    """``value`` fits a column of ``field_type`` (null always does; an integer fits a number; an
    Arrow column takes what pyarrow converts to its type, as the part's writer will)."""
    if value is None:
        return True
    if is_arrow_type(field_type):
        return _fits_arrow(arrow_type(field_type), value)
    found = json_type(value)
    return found == field_type or (field_type == "number" and found == "integer")


def _fits_arrow(data_type: pa.DataType, value: object) -> bool:
    if isinstance(value, pa.Scalar):  # a value Python cannot hold (nanoseconds): kept as Arrow's
        return value.type.equals(data_type)
    try:
        pa.scalar(value, type=data_type)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return False
    return True


def json_text(value: object) -> str:
    """Compact JSON; a value JSON has no type for (a Parquet timestamp in a list) as its text."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_as_json)


def _as_json(value: object) -> object:
    return _arrow_json(value) if isinstance(value, pa.Scalar) else str(value)


def _arrow_json(value: pa.Scalar) -> object:
    """An Arrow scalar Python cannot hold (nanoseconds, or a nested value holding them) as JSON,
    never through ``as_py()`` (which its str() and repr() call too, and which fails for them): a
    temporal value as its type and its count of units; a struct, list or dictionary value as what
    it holds (its scalars come back here)."""
    if not value.is_valid:
        return None
    if isinstance(count := getattr(value, "value", None), int):  # timestamps, times, durations, dates
        return f"{value.type}:{count}"
    if pa.types.is_struct(value.type):
        return dict(value.items())
    if isinstance(value, pa.DictionaryScalar):
        return value.value
    if isinstance(values := getattr(value, "values", None), pa.Array):  # the list types
        return list(values)
    return value.as_py()


def column_value(field_type: str, value: object) -> object:
    """What the Parquet column holds for ``value``."""
    if value is None:
        return None
    if field_type == "json":
        return json_text(value)
    if field_type == "number":
        return float(value)  # type: ignore[arg-type]  # accepts() let only numbers through
    return value


def first_types(names: tuple[str, ...], earlier: dict[str, str], fields: dict[str, object]) -> dict[str, str]:
    """``earlier`` with the types of ``fields``' values for names it has none for yet."""
    found = dict(earlier)
    for name in names:
        # Only a JSON type: a value JSON has none for comes from a Parquet schema, which typed it already.
        if name not in found and (field_type := json_type(fields.get(name))) in ARROW_TYPES:
            found[name] = field_type
    return found


def merge_section_types(names: tuple[str, ...], per_section: list[dict[str, str]]) -> dict[str, str]:
    """Each field's type from the earliest section that saw it; ``string`` for one never seen."""
    merged: dict[str, str] = {}
    for types in per_section:
        for name, field_type in types.items():
            merged.setdefault(name, field_type)
    return {name: merged.get(name, "string") for name in names}


class IncludedColumns:
    """A job's carried fields as Parquet columns, in the order the job names them (stored type
    records are key-sorted): their Arrow types, and each record's values."""

    def __init__(self, names: list[str] | None, field_types: dict[str, str]) -> None:
        self.field_types = {name: field_types.get(name, "string") for name in names or ()}

    def arrow_types(self) -> dict[str, pa.DataType]:
        return {name: arrow_type(field_type) for name, field_type in self.field_types.items()}

    def values(self, fields: dict | None) -> dict[str, object]:
        return {name: column_value(field_type, (fields or {}).get(name)) for name, field_type in self.field_types.items()}


def types_to_check(job_types: dict[str, str], section_types: dict[str, str]) -> dict[str, str]:
    """The job's field types whose values in one section are checked one by one: all but those a
    Parquet section's schema gives exactly (every value of such a column fits it)."""
    return {name: field_type for name, field_type in job_types.items()
            if not (is_arrow_type(field_type) and section_types.get(name) == field_type)}
