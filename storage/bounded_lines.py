"""The lines of an untrusted byte stream (plain or gzip), none held past a bound.

With ``InputLimits``, a line is read with ``readline(bound + 1)``: a longer one is never held, it
is skipped to its line end a chunk at a time and comes out as a ``LongLine`` of its size, so a
reader holds at most the bound plus one chunk whatever the stream. A gzip stream also counts the
compressed bytes it consumed: once its decompressed bytes pass the limits' floor and their ratio,
``TooCompressed`` stops it (a decompression bomb costs that floor, not its full expansion). The
count is of what ``gzip`` asked for and got, which short reads of the source do not change, so
reading the same bytes twice (planning's scan, then its cut) stops at the same line.
"""
from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from poolq.storage.input_limits import InputLimits

GZIP_MAGIC = b"\x1f\x8b"  # the first two bytes of every gzip stream
_SKIP_CHUNK = 1 << 20  # bytes read at a time while skipping a line over the bound


@dataclass(frozen=True)
class LongLine:
    """A line over the bound, skipped without being held: ``size`` bytes, its line end included."""

    size: int


class TooCompressed(Exception):
    """The gzip stream expanded past the ratio limit: nothing after this point is read."""

    def __init__(self, decompressed: int, compressed: int, ratio: int) -> None:
        super().__init__(f"the gzip stream expands to more than {ratio} times its compressed size ({decompressed} bytes "
                         f"from the first {compressed} compressed): a decompression bomb")


class BoundedLines:
    """The lines of ``stream``: bytes (line end included), or ``LongLine`` for one over the bound."""

    def __init__(self, stream: BinaryIO, limits: InputLimits | None = None) -> None:
        head = b""
        while len(head) < len(GZIP_MAGIC):  # a raw stream may return fewer bytes than asked for
            more = stream.read(len(GZIP_MAGIC) - len(head))
            if not more:
                break
            head += more
        plain = io.BufferedReader(_Prefixed(head, stream))
        self.compressed = head == GZIP_MAGIC
        self._consumed: _Counted | None = None
        self._source: BinaryIO = plain
        if self.compressed:
            self._consumed = _Counted(plain)
            self._source = gzip.GzipFile(fileobj=self._consumed, mode="rb")  # type: ignore[assignment]
        self._limits = limits
        self._read = 0  # bytes of lines read (decompressed)

    def __iter__(self) -> Iterator[bytes | LongLine]:
        if self._limits is None:  # a trusted stream (poolq's own output): lines as they come
            return iter(self._source)
        return self._bounded(self._limits.max_record_bytes)

    def _bounded(self, bound: int) -> Iterator[bytes | LongLine]:
        while raw := self._readline(bound + 1):
            if raw.endswith(b"\n") or len(raw) <= bound:
                yield raw
            else:
                yield LongLine(len(raw) + self._skip_to_line_end())

    def _skip_to_line_end(self) -> int:
        """Read past the rest of a long line, one chunk at a time; how many bytes that was."""
        skipped = 0
        while chunk := self._readline(_SKIP_CHUNK):
            skipped += len(chunk)
            if chunk.endswith(b"\n"):
                break
        return skipped

    def _readline(self, size: int) -> bytes:
        data = self._source.readline(size)
        self._read += len(data)
        limits = self._limits
        if self._consumed is not None and limits is not None and limits.expands_too_far(self._read, self._consumed.count):
            raise TooCompressed(self._read, self._consumed.count, limits.max_compression_ratio)
        return data


class _Counted:
    """A reader that counts the bytes read from it: what gzip consumed of the compressed stream."""

    def __init__(self, source: BinaryIO) -> None:
        self._source = source
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)  # a BufferedReader fills ``size`` unless the stream ends
        self.count += len(data)
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        raise io.UnsupportedOperation("an input stream is read once, forward")


class _Prefixed(io.RawIOBase):
    """``head`` (bytes already read from ``stream``) followed by the rest of ``stream``."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        self._head = head
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._head:
            count = min(len(buffer), len(self._head))
            buffer[:count] = self._head[:count]
            self._head = self._head[count:]
            return count
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
