"""LanceDB (a Lance dataset on a local path or in the bucket): one ``merge_insert`` by key
``(id, chunk_index)`` per load, which also deletes the stale rows: one commit, all or nothing.
The merge updates only rows of the load's owner or without one, and deletes only the owner's
(``sink.py``); a table made before owners were recorded gets the two columns, null, first.

Dense vectors keep the output dtype's width where Lance has it (float16 as float16, float32 and
int8 decoded as float32, binary as +1/-1 float32 signs); sparse vectors as two list columns;
token vectors (token_embed) as a list of vectors per row (Lance's multivector layout).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lancedb
import pyarrow as pa

from poolq.jobs.sink_settings import SinkConfig
from poolq.products.sinks.sink import (
    DENSE_COLUMN,
    LINEAGE_COLUMN,
    OWNER_COLUMNS,
    STORED_KEYS_SCHEMA,
    TENANT_COLUMN,
    RowOwner,
    Sink,
    SinkError,
    SinkLoad,
    SinkSchema,
    SinkUnavailable,
)

# A target row the merge may update: one without an owner, or the source's own.
_MAY_OVERWRITE = (f"target.{LINEAGE_COLUMN} IS NULL OR (target.{TENANT_COLUMN} = source.{TENANT_COLUMN} "
                  f"AND target.{LINEAGE_COLUMN} = source.{LINEAGE_COLUMN})")


class LanceDbSink(Sink):
    def __init__(self, config: SinkConfig, uri: str, storage_options: dict[str, str] | None = None) -> None:
        self.config = config
        self.uri = uri
        self.storage_options = storage_options

    def _database(self) -> Any:
        try:
            return lancedb.connect(self.uri, storage_options=self.storage_options)
        except OSError as exc:
            raise SinkUnavailable(f"LanceDB: {exc}") from None

    def _table(self, database: Any) -> Any | None:
        try:
            return database.open_table(self.config.table)
        except ValueError:  # Lance: "Table ... was not found"
            return None

    def stored_keys(self) -> pa.Table:
        table = self._table(self._database())
        if table is None:
            return STORED_KEYS_SCHEMA.empty_table()
        present = [name for name in STORED_KEYS_SCHEMA.names if name in table.schema.names]
        keys = table.search().select(present).limit(None).to_arrow()
        for name in OWNER_COLUMNS:
            if name not in present:  # a table made before owners were recorded: its rows have none
                keys = keys.append_column(name, pa.nulls(keys.num_rows, pa.string()))
        return keys.select(STORED_KEYS_SCHEMA.names).cast(STORED_KEYS_SCHEMA)

    def apply(self, load: SinkLoad) -> None:
        database = self._database()
        schema = lance_schema(load.schema)
        table = self._table(database)
        if table is None:
            if not self.config.create_table:
                raise SinkError(f"table {self.config.table} does not exist and create_table is false")
            table = database.create_table(self.config.table, schema=schema, exist_ok=True)
        missing = {name: "CAST(NULL AS string)" for name in OWNER_COLUMNS if name not in table.schema.names}
        if missing:
            table.add_columns(missing)
        stale_ids = sorted({record_id for record_id, _ in load.stale})
        merge = (table.merge_insert(["id", "chunk_index"]).when_matched_update_all(where=_MAY_OVERWRITE)
                 .when_not_matched_insert_all())
        if stale_ids:  # the owner's target rows of these documents that the load does not write: stale
            merge = merge.when_not_matched_by_source_delete(f"{_id_filter(stale_ids)} AND {_owner_filter(load.owner)}")
        try:
            merge.execute(pa.RecordBatchReader.from_batches(schema, _batches(load, schema)))
        except (ValueError, RuntimeError) as exc:  # Lance: a schema that does not match the table's
            raise SinkError(f"LanceDB table {self.config.table}: {exc}") from None


def lance_schema(schema: SinkSchema) -> pa.Schema:
    """The rows' schema with the dense vectors at the output dtype's width."""
    arrow = schema.arrow_schema()
    if schema.dense_dtype == "float16":
        index = arrow.get_field_index(DENSE_COLUMN)
        arrow = arrow.set(index, pa.field(DENSE_COLUMN, pa.list_(pa.float16(), schema.dimensions or 0)))
    return arrow


def _batches(load: SinkLoad, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for table in load.rows:
        yield from table.cast(schema).to_batches()


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _id_filter(ids: list[str]) -> str:
    return f"id IN ({', '.join(map(_quoted, ids))})"


def _owner_filter(owner: RowOwner) -> str:
    return f"{TENANT_COLUMN} = {_quoted(owner.tenant)} AND {LINEAGE_COLUMN} = {_quoted(owner.lineage)}"
