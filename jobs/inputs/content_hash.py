"""What a document's embedding depends on, as one digest: the ``content_hash`` output column.

Two records with the same id and content hash, embedded with the same model and options, get
the same vectors; incremental runs carry such documents instead of embedding them again.
"""
from __future__ import annotations

import hashlib
import json


def content_hash(text: str, chunk_spans: list[list[int]] | None = None, query: str | None = None) -> str:
    """sha256 hex of the UTF-8 text; with ``chunk_spans``, of the text, a NUL, then the spans as
    compact JSON (``[[0,40],[40,200]]``); a pair's ``query`` follows after a 0x01 byte. Without
    spans or query it is simply ``sha256(text)``."""
    digest = hashlib.sha256(text.encode("utf-8"))
    if chunk_spans is not None:
        digest.update(b"\x00" + json.dumps(chunk_spans, separators=(",", ":")).encode("ascii"))
    if query is not None:
        digest.update(b"\x01" + query.encode("utf-8"))
    return digest.hexdigest()

