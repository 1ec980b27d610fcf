"""An input object's format: JSONL (plain or gzip) or Parquet, from its name or its first bytes.

The name decides when it says (``.jsonl``, ``.jsonl.gz``, ``.parquet``): a prefix input lists
only such objects. A single object named otherwise is told by its first bytes (``PAR1`` opens
every Parquet file; anything else is read as JSONL, which finds gzip by its own magic).
"""
from __future__ import annotations

from enum import Enum

from poolq.storage import ObjectStore
from poolq.storage.parquet_input import PARQUET_MAGIC, is_parquet


class InputFormat(str, Enum):
    JSONL = "jsonl"
    PARQUET = "parquet"


# What a prefix input reads, by name ending; key order decides the order, not the format.
FORMAT_SUFFIXES: dict[str, InputFormat] = {
    ".jsonl": InputFormat.JSONL, ".jsonl.gz": InputFormat.JSONL, ".parquet": InputFormat.PARQUET,
}
INPUT_SUFFIXES = tuple(FORMAT_SUFFIXES)


def object_format(store: ObjectStore, key: str) -> InputFormat:
    """The format of ``store``'s object ``key``: by its name, else by its first four bytes."""
    for suffix, found in FORMAT_SUFFIXES.items():
        if key.endswith(suffix):
            return found
    with store.open_range(key, 0, len(PARQUET_MAGIC)) as stream:
        head = stream.read()
    return InputFormat.PARQUET if is_parquet(head) else InputFormat.JSONL
