"""LanceDB (a Lance dataset on a local path or in the bucket): one ``merge_insert`` by key
``(id, chunk_index)`` per load, which also deletes the stale rows: one commit, all or nothing.

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
from poolq.jobs.sinks.sink import DENSE_COLUMN, STORED_KEYS_SCHEMA, Sink, SinkError, SinkLoad, SinkSchema, SinkUnavailable


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
        return table.search().select(STORED_KEYS_SCHEMA.names).limit(None).to_arrow().cast(STORED_KEYS_SCHEMA)

    def apply(self, load: SinkLoad) -> None:
        database = self._database()
        schema = lance_schema(load.schema)
        table = self._table(database)
        if table is None:
            if not self.config.create_table:
                raise SinkError(f"table {self.config.table} does not exist and create_table is false")
            table = database.create_table(self.config.table, schema=schema, exist_ok=True)
        stale_ids = sorted({record_id for record_id, _ in load.stale})
        merge = table.merge_insert(["id", "chunk_index"]).when_matched_update_all().when_not_matched_insert_all()
        if stale_ids:  # target rows of these documents that the load does not write: stale
            merge = merge.when_not_matched_by_source_delete(_id_filter(stale_ids))
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


def _id_filter(ids: list[str]) -> str:
    quoted = ", ".join("'" + record_id.replace("'", "''") + "'" for record_id in ids)
    return f"id IN ({quoted})"
