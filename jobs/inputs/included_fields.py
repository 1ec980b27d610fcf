"""Input fields carried into every output row (``output.include_fields``): their JSON types.

A field's type is decided once per job, from its first non-null value in input order (each
section's scan notes its first one; the decide stage takes the earliest section's). A record
whose value has another type is a per-record error (an integer is a valid ``number``); a
missing field is null. Nested values (objects, arrays) are carried as their JSON text.
"""
from __future__ import annotations

import json
from typing import Literal

import pyarrow as pa

FieldType = Literal["string", "integer", "number", "boolean", "json"]
ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_(), "json": pa.string(),
}
# The carried fields of one record, as JSON: more is a per-record error (they sit in every row).
MAX_INCLUDED_BYTES = 64 << 10


def json_type(value: object) -> FieldType | None:
    """The field type of one JSON value; None for null."""
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
    return "json"


def accepts(field_type: str, value: object) -> bool:
    """``value`` fits a column of ``field_type`` (null always does; an integer fits a number)."""
    found = json_type(value)
    return found is None or found == field_type or (field_type == "number" and found == "integer")


def column_value(field_type: str, value: object) -> object:
    """What the Parquet column holds for ``value``."""
    if value is None:
        return None
    if field_type == "json":
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if field_type == "number":
        return float(value)  # type: ignore[arg-type]  # accepts() let only numbers through
    return value


def first_types(names: tuple[str, ...], earlier: dict[str, str], fields: dict[str, object]) -> dict[str, str]:
    """``earlier`` with the types of ``fields``' values for names it has none for yet."""
    found = dict(earlier)
    for name in names:
        if name not in found and (field_type := json_type(fields.get(name))) is not None:
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
        return {name: ARROW_TYPES[field_type] for name, field_type in self.field_types.items()}

    def values(self, fields: dict | None) -> dict[str, object]:
        return {name: column_value(field_type, (fields or {}).get(name)) for name, field_type in self.field_types.items()}
