"""Which format an upload says it is (``POST /v1/uploads``'s ``format``): its bytes first, then its name.

The same order the readers use (``jobs/inputs/input_format.py``), checked before anything is sent:
a file named ``.parquet`` that is not Parquet is refused here, naming the file, not after a job
has failed on it.
"""
from __future__ import annotations

from poolq.jobs.inputs.input_format import suffix_of, suffix_of_bytes
from poolq.storage.parquet_input import PARQUET_MAGIC


def upload_format(data: bytes, name: str | None = None) -> str:
    """``jsonl``, ``jsonl.gz`` or ``parquet`` for a file's ``data`` (and its ``name``, if it has one)."""
    by_bytes = suffix_of_bytes(data[:len(PARQUET_MAGIC)])
    if by_bytes is not None:
        return by_bytes.removeprefix(".")
    if name is not None and suffix_of(name) == ".parquet":
        raise ValueError(f"{name} is named as Parquet but is not: a Parquet file starts with {PARQUET_MAGIC!r}, "
                         f"this one with {data[:len(PARQUET_MAGIC)]!r}")
    return "jsonl"
