"""When a document is *unchanged* since an incremental run's baseline: the key both sides compare.

A carried document's rows are the baseline's, copied whole: its vectors and the input fields its
rows carry (``output.include_fields``). So the key is the content hash, and for a job that
carries fields, those fields' values too, each as the output column holds it and tagged with its
type: a document whose text is the same but whose fields changed (a new title, a string where the
job's column is an integer) is embedded again, as a fresh run would write it.

The new side keys a record from its input values, typed as the column that would hold them (a
Parquet column's Arrow type, else the value's JSON type); the baseline side keys a row from its
stored values, typed by the job's field types. The two meet where the rows would be equal. An
integer in a ``number`` column is the one value they key apart although the row would hold the
same 1.0: such a document is embedded again (a cost, never a wrong row). A baseline part is
keyed as it is spilled into the decide stage's partitions (``spill_baseline_part``).
"""
from __future__ import annotations

import hashlib

import pyarrow as pa

from poolq.jobs.inputs.included_fields import ARROW_TYPES, arrow_type, column_value, is_arrow_type, json_text, json_type
from poolq.jobs.planning.id_partitions import HASH_DIGITS, IdPartitions
from poolq.storage import ObjectStore, read_embeddings
from poolq.storage.parquet_input import python_values


def record_carry_key(content_hash: str, names: tuple[str, ...], section_types: dict[str, str],
                     fields: dict | None) -> str:
    """An input record's key: ``section_types`` are its section's field types (a Parquet schema's are exact)."""
    if not names:
        return content_hash[:HASH_DIGITS]
    values = (fields or {})
    return _key(content_hash, [_record_value(section_types.get(name), values.get(name)) for name in names])


class BaselineUnfit(Exception):
    """The baseline's rows cannot sit beside this job's: a carried field's column has another type."""


def spill_baseline_part(store: ObjectStore, key: str, index: int, partitions: IdPartitions,
                        field_types: dict[str, str]) -> None:
    """One baseline part's documents' (id, carry key, part ``index``) into ``partitions``."""
    names = tuple(field_types)
    table = read_embeddings(store.get(key), columns=["id", "content_hash", *names])
    if "content_hash" not in table.column_names:
        return  # written before content hashes existed: its documents are embedded again
    if not columns_match(table.schema, names, field_types):
        raise BaselineUnfit(f"{store.uri(key)} carries {', '.join(names)} typed otherwise than this job does")
    seen: set[str] = set()  # chunk rows repeat their document's id within a part
    for record_id, carry_key in zip(table.column("id").to_pylist(), stored_carry_keys(table, names, field_types)):
        if record_id not in seen:
            seen.add(record_id)
            partitions.add_baseline(record_id, carry_key, index)


def stored_carry_keys(table: pa.Table, names: tuple[str, ...], job_types: dict[str, str]) -> list[str]:
    """A baseline part's rows' keys (``table``: its ``content_hash`` and ``names`` columns, each a
    column of the job's type: see ``columns_match``)."""
    hashes = table.column("content_hash").to_pylist()
    if not names:
        return [content_hash[:HASH_DIGITS] for content_hash in hashes]
    # as an input row's values are read (python_values): nanosecond values stay Arrow scalars, on both sides
    columns = [[_tagged(job_types[name], value) for value in python_values(table.column(name))] for name in names]
    return [_key(content_hash, list(values)) for content_hash, *values in zip(hashes, *columns)]


def columns_match(schema: pa.Schema, names: tuple[str, ...], job_types: dict[str, str]) -> bool:
    """The baseline part has each carried field as a column of the job's Arrow type: its rows fit
    this job's parts (a field typed otherwise now would make parts of two schemas)."""
    return all(name in schema.names and schema.field(name).type.equals(arrow_type(job_types[name])) for name in names)


def _record_value(section_type: str | None, value: object) -> list:
    if section_type is not None and is_arrow_type(section_type):
        return _tagged(section_type, value)
    own = json_type(value)
    return _tagged(own, column_value(own, value) if own in ARROW_TYPES else value)


def _tagged(field_type: str | None, value: object) -> list:
    return [None, None] if value is None else [field_type, value]


def _key(content_hash: str, values: list) -> str:
    text = content_hash + "\x00" + json_text(values)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_DIGITS]
