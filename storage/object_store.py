"""The object-store boundary: an interface, with S3 and local-filesystem implementations."""
from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO, Iterable, Iterator


class StorageError(RuntimeError):
    """A store operation failed."""


class ObjectNotFoundError(StorageError, KeyError):
    """The key does not exist."""

    def __str__(self) -> str:
        return str(self.args[0])


class ObjectExistsError(StorageError):
    """A conditional write (``if_absent``) found the key already written."""


class UnsupportedOperation(StorageError):
    """This kind of store cannot do that (e.g. presigned uploads on the local filesystem)."""


@dataclass(frozen=True)
class PendingUpload:
    """A multipart upload that was started and neither completed nor aborted."""

    key: str
    upload_id: str
    initiated: datetime


@dataclass(frozen=True)
class ObjectInfo:
    """What identifies an object's current content: its size and a version that changes on every
    write (S3: the ETag; a local file: its modification time in nanoseconds); ``modified``: when it
    was last written (seconds since the epoch; S3's LastModified is whole seconds), None if unknown."""

    size: int
    version: str
    modified: float | None = None


class ObjectStore(ABC):
    """Flat keys -> bytes. Keys use '/' separators and never start with '/'."""

    @abstractmethod
    def put(self, key: str, data: bytes, *, if_absent: bool = False) -> None:
        """Write ``data`` at ``key`` atomically (readers see old or new, never a part).

        With ``if_absent`` the write happens only if nothing is at ``key`` yet; otherwise
        :class:`ObjectExistsError` is raised and the existing object is kept.
        """

    def put_once(self, key: str, data: bytes) -> bool:
        """Write ``data`` unless something is at ``key`` already; True if this call wrote it.

        The ledger's write-once records (a claim, a commit, a verdict) are all this call."""
        try:
            self.put(key, data, if_absent=True)
        except ObjectExistsError:
            return False
        return True

    @abstractmethod
    def put_chunks(self, key: str, chunks: Iterable[bytes]) -> None:
        """Write the concatenation of ``chunks`` at ``key`` atomically, holding at most about one
        multipart part of it at a time (for outputs whose size grows with the job)."""

    @abstractmethod
    def get(self, key: str) -> bytes:
        """The whole object; :class:`ObjectNotFoundError` if absent."""

    @abstractmethod
    def open(self, key: str) -> BinaryIO:
        """A streaming binary reader over the object; :class:`ObjectNotFoundError` if absent."""

    @abstractmethod
    def open_range(self, key: str, start: int, end: int) -> BinaryIO:
        """A streaming reader over bytes ``[start, end)`` of the object (shards read their part of
        an input this way, without a copy); :class:`ObjectNotFoundError` if absent."""

    @abstractmethod
    def stat(self, key: str) -> ObjectInfo:
        """Size and version of the object; :class:`ObjectNotFoundError` if absent."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def list(self, prefix: str) -> Iterator[str]:
        """Keys under ``prefix``, in lexicographic order."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; removing an absent key is not an error."""

    @abstractmethod
    def uri(self, key: str) -> str:
        """The URI naming ``key`` in this store (``s3://bucket/key`` or ``file:///...``)."""

    @abstractmethod
    def presigned_get_url(self, key: str, expires_s: int) -> str:
        """A URL that reads ``key`` without credentials, valid for ``expires_s`` seconds."""

    @abstractmethod
    def list_prefixes(self, prefix: str) -> builtins.list[str]:
        """The names one level below ``prefix`` (which ends with '/') that have keys under them."""

    def presigned_put_url(self, key: str, expires_s: int) -> str:
        """A URL that writes ``key`` with one HTTP PUT, without credentials, for ``expires_s`` seconds."""
        raise UnsupportedOperation(f"{type(self).__name__} cannot hand out upload URLs; use an S3 store")

    def pending_uploads(self, prefix: str) -> builtins.list[PendingUpload]:
        """Multipart uploads under ``prefix`` still open (a writer died mid-upload). None by default."""
        return []

    def abort_upload(self, upload: PendingUpload) -> None:
        """Abort ``upload`` and free its parts."""
