"""An input object's format: JSONL (plain or gzip) or Parquet, from its first bytes, then its name.

The bytes decide first: ``PAR1`` opens every Parquet file, whatever the object is called (an upload
named ``.jsonl`` by an older client is still read as Parquet); gzip (``1f 8b``) is JSONL, which the
JSONL reader unpacks by the same magic. Otherwise the name decides: an object named ``.parquet``
whose bytes are not Parquet fails once, naming the object, rather than each of its lines failing as
invalid JSON. A prefix input lists only objects with one of ``INPUT_SUFFIXES``.
"""
from __future__ import annotations

from enum import Enum

from poolq.storage import ObjectStore
from poolq.storage.parquet_input import PARQUET_MAGIC, NotParquetError, is_parquet

GZIP_MAGIC = b"\x1f\x8b"


class InputFormat(str, Enum):
    JSONL = "jsonl"
    PARQUET = "parquet"


# What a prefix input reads, by name ending; key order decides the order, not the format.
FORMAT_SUFFIXES: dict[str, InputFormat] = {
    ".jsonl": InputFormat.JSONL, ".jsonl.gz": InputFormat.JSONL, ".parquet": InputFormat.PARQUET,
}
INPUT_SUFFIXES = tuple(FORMAT_SUFFIXES)


def suffix_of(name: str) -> str | None:
    """The input ending ``name`` has (the longest: ``.jsonl.gz`` before ``.jsonl``), or None."""
    found = [suffix for suffix in INPUT_SUFFIXES if name.endswith(suffix)]
    return max(found, key=len) if found else None


def suffix_of_bytes(head: bytes) -> str | None:
    """The input ending an object's first bytes say it has (Parquet, gzip), or None (plain text)."""
    if is_parquet(head):
        return ".parquet"
    return ".jsonl.gz" if head.startswith(GZIP_MAGIC) else None


def object_format(store: ObjectStore, key: str, size: int) -> InputFormat:
    """The format of ``store``'s object ``key`` (``size`` bytes): by its first bytes, then its name.

    Raises NotParquetError, naming the object, if its name says Parquet and its bytes do not."""
    with store.open_range(key, 0, min(size, len(PARQUET_MAGIC))) as stream:
        head = stream.read()
    if is_parquet(head):
        return InputFormat.PARQUET
    if suffix_of(key) == ".parquet":
        raise NotParquetError(f"{store.uri(key)} is named as Parquet but is not: a Parquet file starts with "
                              f"{PARQUET_MAGIC!r}, this object with {head!r}" + _looks_like(head))
    return InputFormat.JSONL


def _looks_like(head: bytes) -> str:
    if head.startswith(GZIP_MAGIC):
        return " (gzip: name it .jsonl.gz)"
    if head.lstrip()[:1] in (b"{", b"["):
        return " (it looks like JSON lines: name it .jsonl)"
    return ""
