"""The custom ids a batch's input has used so far, for ``duplicate_custom_id``.

Kept in a private SQLite database on the worker's temporary disk, not in a Python set: an input
file of up to ``POOLQ_MAX_FILE_BYTES`` (512 MiB) of short lines holds some ten million ids, about
a gigabyte as a set of strings; here memory stays within SQLite's page cache whatever the file.
"""
from __future__ import annotations

import sqlite3
from types import TracebackType

_CACHE_KIB = 32 * 1024  # SQLite's page cache: the most memory the ids take


class SeenCustomIds:
    """``add`` says whether an id is new; use it as a context manager (the database is deleted on close)."""

    def __init__(self) -> None:
        # "": a private on-disk database in the temporary directory, removed when closed.
        self._db = sqlite3.connect("", isolation_level=None)
        for pragma in (f"cache_size=-{_CACHE_KIB}", "journal_mode=OFF", "synchronous=OFF", "temp_store=FILE"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute("CREATE TABLE ids (id BLOB PRIMARY KEY) WITHOUT ROWID")
        self._db.execute("BEGIN")  # one transaction for the whole input: no sync per line

    def add(self, custom_id: str) -> bool:
        """Record ``custom_id``; False if an earlier call recorded it already. Compared as the exact
        code points (bytes: a JSON string may hold a lone surrogate, which is no UTF-8 text)."""
        key = custom_id.encode("utf-8", "surrogatepass")
        return self._db.execute("INSERT OR IGNORE INTO ids VALUES (?)", (key,)).rowcount == 1

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "SeenCustomIds":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
