"""Local-filesystem object store: the cheap in-process implementation (and `poolq embed`'s)."""
from __future__ import annotations

import builtins
import io
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from poolq.storage.object_keys import validate_key
from poolq.storage.object_store import ObjectExistsError, ObjectInfo, ObjectNotFoundError, ObjectStore


class LocalObjectStore(ObjectStore):
    """Objects are files under ``root``; writes go to a temp file, then an atomic rename."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / validate_key(key)

    def put(self, key: str, data: bytes, *, if_absent: bool = False) -> None:
        self._write(key, (data,), if_absent)

    def put_chunks(self, key: str, chunks: Iterable[bytes]) -> None:
        self._write(key, chunks, if_absent=False)

    def _write(self, key: str, chunks: Iterable[bytes], if_absent: bool) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                for chunk in chunks:
                    handle.write(chunk)
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

    def open_range(self, key: str, start: int, end: int) -> BinaryIO:
        handle = self.open(key)
        handle.seek(start)
        return io.BufferedReader(_Limited(handle, max(0, end - start)))

    def stat(self, key: str) -> ObjectInfo:
        try:
            found = self._path(key).stat()
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFoundError(f"{self.uri(key)} does not exist") from None
        return ObjectInfo(size=found.st_size, version=str(found.st_mtime_ns), modified=found.st_mtime)

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


class _Limited(io.RawIOBase):
    """At most ``remaining`` bytes of ``handle``, then end of stream (closes ``handle`` with it)."""

    def __init__(self, handle: BinaryIO, remaining: int) -> None:
        self._handle, self._remaining = handle, remaining

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._handle.read(min(len(buffer), self._remaining))
        self._remaining -= len(data)
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._handle.close()
        super().close()
