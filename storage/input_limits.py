"""What one record of an untrusted input may take while it is read: the readers' memory bound.

The jobs layer sets the numbers from its settings (``jobs/inputs/record_limits.py``); the
readers (``jsonl.py``, ``bounded_lines.py``, ``parquet_input.py``) enforce them before a record
is held whole: a record over the bound becomes that record's error, and reading goes on.
"""
from __future__ import annotations

from dataclasses import dataclass

RECORD_TOO_LARGE = "record_too_large"
INPUT_TOO_COMPRESSED = "input_too_compressed"


@dataclass(frozen=True)
class InputLimits:
    max_record_bytes: int  # a JSONL line (its line end not counted), or a Parquet row's cells as read
    # A decompression bomb: a gzip stream whose decompressed bytes pass both the floor and this many
    # times the compressed bytes read so far stops being read; a Parquet column chunk whose footer
    # declares more than ``max_record_bytes`` uncompressed, or values decoding past the floor, at
    # such a ratio is not read.
    max_compression_ratio: int = 100
    ratio_floor_bytes: int = 256 << 20
    origin: str = ""  # where ``max_record_bytes`` comes from, for messages (a setting's name)

    def too_large(self, size: int, what: str) -> str:
        """Why a record of ``size`` bytes is refused, after its place: ``the line holds ... bytes; ...``."""
        return f"{what} {size} bytes; a record may take at most {self.max_record_bytes} bytes{self.origin}"

    def expands_too_far(self, decompressed: int, compressed: int) -> bool:
        """Whether a stream that gave ``decompressed`` bytes from ``compressed`` is a bomb (gzip; a
        Parquet chunk's values at their width)."""
        return decompressed > self.ratio_floor_bytes and decompressed > self.max_compression_ratio * compressed

    def chunk_bomb(self, uncompressed: int, compressed: int) -> bool:
        """Whether a Parquet column chunk declaring these sizes would expand too far to read: past
        one record's bound (a page, which pyarrow decodes whole, can be as large as its chunk)."""
        return uncompressed > self.max_record_bytes and uncompressed > self.max_compression_ratio * compressed
