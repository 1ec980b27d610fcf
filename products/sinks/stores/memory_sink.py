"""The in-process sink (``memory://name``): rows in a dict by key, for tests and ``poolq embed``.

Sinks of one name share their rows within a process (``MemorySink.named``), as connections to one
database do; nothing outlives the process."""
from __future__ import annotations

import threading
from typing import ClassVar

import pyarrow as pa

from poolq.products.sinks.sink import LINEAGE_COLUMN, STORED_KEYS_SCHEMA, TENANT_COLUMN, RowKey, Sink, SinkError, SinkLoad


class MemorySink(Sink):
    _stores: ClassVar[dict[str, dict[RowKey, dict]]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, rows: dict[RowKey, dict], create_table: bool = True) -> None:
        self.rows = rows
        self.create_table = create_table
        self.created = bool(rows)

    @classmethod
    def named(cls, name: str, create_table: bool = True) -> "MemorySink":
        with cls._lock:
            return cls(cls._stores.setdefault(name, {}), create_table)

    def stored_keys(self) -> pa.Table:
        rows = list(self.rows.values())
        return pa.Table.from_pylist([{name: row.get(name) for name in STORED_KEYS_SCHEMA.names} for row in rows],
                                    schema=STORED_KEYS_SCHEMA)

    def apply(self, load: SinkLoad) -> None:
        if not self.rows and not self.create_table and not self.created:
            raise SinkError("table does not exist and create_table is false")
        self.created = True
        for batch in load.rows:
            for row in batch.to_pylist():
                key = (row["id"], row["chunk_index"])
                if key not in self.rows or load.owner.may_overwrite(*_owner(self.rows[key])):
                    self.rows[key] = row
        for key in load.stale:
            if key in self.rows and load.owner.owns(*_owner(self.rows[key])):
                del self.rows[key]


def _owner(row: dict) -> tuple[str | None, str | None]:
    return row.get(TENANT_COLUMN), row.get(LINEAGE_COLUMN)
