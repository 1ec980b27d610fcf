"""The bound on one record of an uploaded input, from the settings: what reading it may hold.

``POOLQ_MAX_DOCUMENT_CHARS`` bounds every text, inline (``steps/submit.py``) or uploaded. An
uploaded record is bounded twice:

- **while it is read, in bytes**: a JSONL line (its line end not counted) or the cells a Parquet
  row is read with may take ``6 × POOLQ_MAX_DOCUMENT_CHARS + 1 MiB`` bytes (12 MiB + 1 MiB by
  default). Six bytes per character is the longest JSON spells one (``\\u001f``; raw UTF-8
  takes at most four), and the MiB is for the id, chunk spans, carried fields (64 KiB at most),
  other fields and JSON framing. A longer record is never held: it is ``record_too_large``.
- **once parsed, in characters**: a text (and a score pair's query) longer than the setting is
  ``text_too_long``, as an inline one is refused.

A gzip input that expands past ``POOLQ_MAX_INPUT_COMPRESSION_RATIO`` times its compressed bytes
once past 256 MiB stops being read there (``input_too_compressed``).
"""
from __future__ import annotations

from poolq.jobs.inputs.records import InputRecord, RecordError
from poolq.jobs.settings import Settings
from poolq.storage.input_limits import InputLimits

BYTES_PER_CHARACTER = 6  # a JSON \uXXXX escape: the most one character (of the BMP) takes in a line
FRAMING_BYTES = 1 << 20  # the rest of a record: id, spans, carried fields, other fields, braces and quotes
TEXT_TOO_LONG = "text_too_long"


def input_limits(settings: Settings) -> InputLimits:
    """What one uploaded record may take while it is read, with the settings behind it for messages."""
    return InputLimits(max_record_bytes=BYTES_PER_CHARACTER * settings.limits.max_document_chars + FRAMING_BYTES,
                       max_compression_ratio=settings.limits.max_input_compression_ratio,
                       origin=f" ({BYTES_PER_CHARACTER} per character of POOLQ_MAX_DOCUMENT_CHARS="
                              f"{settings.limits.max_document_chars}, plus {FRAMING_BYTES})")


def text_too_long(record: InputRecord, max_chars: int) -> RecordError | None:
    """The error of a record whose text (or query) has more than ``max_chars`` characters, or None."""
    for name, text in (("text", record.text), ("query", record.query or "")):
        if len(text) > max_chars:
            return RecordError(record.id, record.line, TEXT_TOO_LONG, f"{record.place}: the {name} has {len(text)} "
                               f"characters; at most {max_chars} are accepted (POOLQ_MAX_DOCUMENT_CHARS)")
    return None
