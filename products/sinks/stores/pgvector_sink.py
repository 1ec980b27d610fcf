"""pgvector (PostgreSQL): rows bulk-loaded with binary ``COPY`` into a staging table, then
upserted and the stale rows deleted in the same transaction: a load is all or nothing. The upsert
updates only rows of the load's owner or without one, and the delete takes only the owner's
(``sink.py``); a table made before owners were recorded gets the two columns, null, first.

The table (created when configured to; docs/sinks/pgvector.md has its schema) is keyed by
``(id, chunk_index)``; carried fields are typed columns; an index only when configured.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
from pgvector import Bit, HalfVector, SparseVector, Vector
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb

from poolq.jobs.sink_settings import SinkConfig
from poolq.products.sinks.sink import (
    DENSE_COLUMN,
    LINEAGE_COLUMN,
    OWNER_COLUMNS,
    SPARSE_INDICES,
    SPARSE_VALUES,
    STORED_KEYS_SCHEMA,
    TENANT_COLUMN,
    Sink,
    SinkError,
    SinkLoad,
    SinkSchema,
    SinkUnavailable,
)
from poolq.products.sinks.stores.pgvector_types import (
    DENSE_SQL_COLUMN,
    SPARSE_SQL_COLUMN,
    dense_type,
    index_target,
    sql_type,
    vector_columns,
)

CONNECT_TIMEOUT_S = 10
_KEY_COLUMNS = [("id", "text NOT NULL"), ("chunk_index", "integer NOT NULL"), ("content_hash", "text"),
                ("vector_origin", "text"), (TENANT_COLUMN, "text"), (LINEAGE_COLUMN, "text")]
# A stored row the upsert may update (``t``): one without an owner, or the staged row's own.
_MAY_OVERWRITE = sql.SQL("t.{lineage} IS NULL OR (t.{tenant} = EXCLUDED.{tenant} AND t.{lineage} = EXCLUDED.{lineage})").format(
    tenant=sql.Identifier(TENANT_COLUMN), lineage=sql.Identifier(LINEAGE_COLUMN))


class PgvectorSink(Sink):
    def __init__(self, config: SinkConfig) -> None:
        self.config = config
        self.table = sql.Identifier(config.table)

    def _connect(self) -> psycopg.Connection:
        try:
            return psycopg.connect(self.config.url.get_secret_value(), connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.OperationalError as exc:
            raise SinkUnavailable(f"cannot connect to PostgreSQL: {_reason(exc)}") from None

    def stored_keys(self) -> pa.Table:
        with self._connect() as conn, _translated():
            if not self._exists(conn):
                return STORED_KEYS_SCHEMA.empty_table()
            # A table made before owners were recorded has no owner columns: its rows have none.
            owned = set(OWNER_COLUMNS) <= self._column_names(conn)
            columns = [sql.Identifier(name) if owned or name not in OWNER_COLUMNS else sql.SQL("NULL")
                       for name in STORED_KEYS_SCHEMA.names]
            rows = conn.execute(sql.SQL("SELECT {} FROM {}").format(sql.SQL(", ").join(columns), self.table))
            return pa.Table.from_pylist([dict(zip(STORED_KEYS_SCHEMA.names, row)) for row in rows],
                                        schema=STORED_KEYS_SCHEMA)

    def apply(self, load: SinkLoad) -> None:
        columns = self._columns(load.schema)
        with self._connect() as conn, _translated(), conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            self._ensure_table(conn, load.schema, columns)
            self._ensure_owner_columns(conn)
            names = [name for name, _ in columns]
            conn.execute(sql.SQL("CREATE TEMP TABLE poolq_stage ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA")
                         .format(sql.SQL(", ").join(map(sql.Identifier, names)), self.table))
            with conn.cursor().copy(sql.SQL("COPY poolq_stage ({}) FROM STDIN (FORMAT BINARY)")
                                    .format(sql.SQL(", ").join(map(sql.Identifier, names)))) as copy:
                copy.set_types([_copy_type(kind) for _, kind in columns])
                for batch in load.rows:
                    for row in _values(batch, load.schema, names):
                        copy.write_row(row)
            self._delete(conn, load)
            updates = sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(name)) for name in names[2:])
            conn.execute(sql.SQL("INSERT INTO {table} AS t ({cols}) SELECT {cols} FROM poolq_stage "
                                 "ON CONFLICT (id, chunk_index) DO UPDATE SET {updates} WHERE {may_overwrite}")
                         .format(table=self.table, cols=sql.SQL(", ").join(map(sql.Identifier, names)), updates=updates,
                                 may_overwrite=_MAY_OVERWRITE))

    def _columns(self, schema: SinkSchema) -> list[tuple[str, str]]:
        return [*_KEY_COLUMNS, *vector_columns(schema), *((field.name, sql_type(field.type)) for field in schema.fields)]

    def _exists(self, conn: psycopg.Connection) -> bool:
        return conn.execute("SELECT to_regclass(%s) IS NOT NULL", [self.config.table]).fetchone() == (True,)

    def _column_names(self, conn: psycopg.Connection) -> set[str]:
        rows = conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
                            "AND NOT attisdropped", [self.config.table])
        return {name for (name,) in rows}

    def _ensure_owner_columns(self, conn: psycopg.Connection) -> None:
        """A table made before owners were recorded gets the columns (null: its rows have no owner)."""
        missing = [name for name in OWNER_COLUMNS if name not in self._column_names(conn)]
        for name in missing:
            conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} text").format(self.table, sql.Identifier(name)))

    def _ensure_table(self, conn: psycopg.Connection, schema: SinkSchema, columns: list[tuple[str, str]]) -> None:
        if self._exists(conn):
            return
        if not self.config.create_table:
            raise SinkError(f"table {self.config.table} does not exist and create_table is false")
        definitions = [sql.SQL("{} {}").format(sql.Identifier(name), sql.SQL(kind)) for name, kind in columns]
        conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({}, PRIMARY KEY (id, chunk_index))")
                     .format(self.table, sql.SQL(", ").join(definitions)))
        if self.config.index:
            column, operators = index_target(schema, self.config.index)
            conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING {} ({} {})").format(
                sql.Identifier(f"{self.config.table}_{column}_idx"), self.table, sql.SQL(self.config.index),
                sql.Identifier(column), sql.SQL(operators)))

    def _delete(self, conn: psycopg.Connection, load: SinkLoad) -> None:
        if not load.stale:
            return
        ids, indexes = zip(*sorted(load.stale))
        conn.execute(sql.SQL("DELETE FROM {} t USING unnest(%s::text[], %s::int[]) AS s(id, chunk_index) "
                             "WHERE t.id = s.id AND t.chunk_index = s.chunk_index AND t.{} = %s AND t.{} = %s")
                     .format(self.table, sql.Identifier(TENANT_COLUMN), sql.Identifier(LINEAGE_COLUMN)),
                     [list(ids), list(indexes), load.owner.tenant, load.owner.lineage])


def _copy_type(kind: str) -> str:
    """The type name binary COPY dumps a column as (a vector type without its dimensions)."""
    return {"text NOT NULL": "text", "integer NOT NULL": "int4"}.get(kind, kind.split("(")[0])


def _values(batch: pa.Table, schema: SinkSchema, names: list[str]) -> Iterator[list[Any]]:
    """Each row's COPY values, in ``names`` order: vectors as pgvector's types, nested fields as JSON."""
    columns: dict[str, list[Any]] = {name: batch.column(name).to_pylist() for name in STORED_KEYS_SCHEMA.names}
    kind = dense_type(schema)
    if kind:
        dense = batch.column(DENSE_COLUMN).combine_chunks()
        matrix = dense.values.to_numpy(zero_copy_only=False).reshape(len(dense), -1)
        wrap = {"vector": Vector, "halfvec": HalfVector, "bit": lambda row: Bit(np.asarray(row) > 0)}[kind]
        columns[DENSE_SQL_COLUMN] = [wrap(row) for row in matrix]
    if schema.sparse:
        dimensions = schema.sparse_dimensions or 0
        columns[SPARSE_SQL_COLUMN] = [
            SparseVector(dict(zip(indices, values)), dimensions)
            for indices, values in zip(batch.column(SPARSE_INDICES).to_pylist(), batch.column(SPARSE_VALUES).to_pylist())
        ]
    for field in schema.fields:
        values = batch.column(field.name).to_pylist()
        columns[field.name] = [Jsonb(value) for value in values] if sql_type(field.type) == "jsonb" else values
    return (list(row) for row in zip(*(columns[name] for name in names)))


@contextmanager
def _translated() -> Iterator[None]:
    """PostgreSQL's errors as sink errors: lost connections retryable, the rest named and fatal."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raise SinkUnavailable(f"PostgreSQL: {_reason(exc)}") from None
    except psycopg.Error as exc:
        raise SinkError(f"PostgreSQL: {_reason(exc)}") from None


def _reason(exc: psycopg.Error) -> str:
    """The server's primary message (never the connection string), else the first line."""
    primary = exc.diag.message_primary if exc.diag else None
    return primary or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

