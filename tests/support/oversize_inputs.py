"""Oversize inputs made cheaply, never held: one JSONL line of millions of repeated characters.

gzip members concatenate into one valid stream, so a line of N MiB of ``a`` is N copies of one
small compressed MiB (about 1 KB): a 1 GiB line costs about 1 MB to write and nothing to hold.
"""
from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Iterable, Iterator

MIB = 1 << 20
_BLOCK = b"a" * MIB
_MEMBER = gzip.compress(_BLOCK, compresslevel=9, mtime=0)  # one MiB of the long line, compressed


def jsonl(rows: Iterable[dict]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def long_line_chunks(before: list[dict], mib: int, after: list[dict], long_id: str = "long",
                     compressed: bool = True) -> Iterator[bytes]:
    """``before``'s lines, then ``{"id": long_id, "text": "aaa…"}`` with ``mib`` MiB of text, then
    ``after``'s: as concatenated gzip members, or plain (a MiB of the text at a time)."""
    pack = (lambda data: gzip.compress(data, mtime=0)) if compressed else (lambda data: data)
    yield pack(jsonl(before) + b'{"id": "' + long_id.encode() + b'", "text": "')
    block = _MEMBER if compressed else _BLOCK
    for _ in range(mib):
        yield block
    yield pack(b'"}\n' + jsonl(after))


def write_chunks(path: Path, chunks: Iterable[bytes]) -> Path:
    with path.open("wb") as handle:
        for chunk in chunks:
            handle.write(chunk)
    return path


class ChunkStream(io.RawIOBase):
    """A read-once stream over ``chunks``; with ``short``, every read returns at most that many bytes
    (a network stream's short reads), so a reader must not depend on how reads are cut."""

    def __init__(self, chunks: Iterable[bytes], short: int | None = None) -> None:
        self._chunks = iter(chunks)
        self._pending = memoryview(b"")
        self._short = short

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = memoryview(chunk)
        count = min(len(buffer), len(self._pending), self._short or len(buffer))
        buffer[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        return count
