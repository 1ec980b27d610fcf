"""Local-filesystem object store: the cheap in-process implementation (and `poolq embed`'s)."""
from __future__ import annotations

import builtins
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterator

from poolq.storage.object_keys import validate_key
from poolq.storage.object_store import ObjectExistsError, ObjectNotFoundError, ObjectStore


class LocalObjectStore(ObjectStore):
    """Objects are files under ``root``; writes go to a temp file, then an atomic rename."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / validate_key(key)

    def put(self, key: str, data: bytes, *, if_absent: bool = False) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            if if_absent:
                # link() fails if the target exists: an atomic create-if-absent.
                try:
                    os.link(tmp_name, path)
                except FileExistsError:
                    raise ObjectExistsError(f"{self.uri(key)} already exists") from None
            else:
                os.replace(tmp_name, path)
        finally:
            if os.path.exists(tmp_name):
                os.unlink(tmp_name)

    def get(self, key: str) -> bytes:
        with self.open(key) as handle:
            return handle.read()

    def open(self, key: str) -> BinaryIO:
        try:
            return self._path(key).open("rb")
        except (FileNotFoundError, IsADirectoryError):
            raise ObjectNotFoundError(f"{self.uri(key)} does not exist") from None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str) -> Iterator[str]:
        keys = []
        for dirpath, _, filenames in os.walk(self.root):
            for filename in filenames:
                if filename.startswith("."):
                    continue  # in-flight temp files
                key = Path(dirpath, filename).relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    keys.append(key)
        return iter(sorted(keys))

    def list_prefixes(self, prefix: str) -> builtins.list[str]:
        directory = self.root / validate_key(prefix.rstrip("/")) if prefix.strip("/") else self.root
        if not directory.is_dir():
            return []
        return sorted(entry.name for entry in directory.iterdir() if entry.is_dir() and any(entry.rglob("*")))

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def uri(self, key: str) -> str:
        return self._path(key).as_uri()

    def presigned_get_url(self, key: str, expires_s: int) -> str:
        # A local file needs no signature; the URI is readable by whoever can read the file.
        return self.uri(key)
