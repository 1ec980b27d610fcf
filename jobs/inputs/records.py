"""Input records: one JSONL line or Parquet row -> a document to embed, or a per-record error.

Messages say where the record is as its object counts: ``line 7`` in JSONL, ``row 7`` in
Parquet (the item's ``unit``); a field that is there but null says so, one that is absent is
missing. Integer ids (a Parquet int64 column, a JSON number) become their decimal text.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Annotated

from pydantic import Field

from poolq.jobs.inputs.content_hash import content_hash
from poolq.jobs.inputs.included_fields import MAX_INCLUDED_BYTES, json_text
from poolq.jobs.spec.record_ids import CONTROL_CHARACTER, MAX_ID_LENGTH
from poolq.storage import JsonlLineError, JsonlObject


@dataclass(frozen=True)
class InputRecord:
    """One valid record, as planning accepted it and a shard reads it back; what a task embeds."""

    id: str
    text: str
    line: int  # 1-based line (JSONL) or row (Parquet) of its object
    chunk_spans: list[list[int]] | None = None  # caller-given character spans
    query: str | None = None  # score jobs: the pair's first text (the record's text is its second)
    query_id: str | None = None  # score jobs: pairs sharing it are ranked together (a rerank)
    fields: dict | None = None  # output.include_fields: name -> value (None when missing)
    # What ``line`` counts, for messages: "line" or "row" (not stored: a shard's copies are JSONL lines)
    unit: Annotated[str, Field(exclude=True)] = "line"

    @property
    def place(self) -> str:
        """Where the record is, as every per-record message begins: ``line 7 (id 'a')``."""
        return f"{self.unit} {self.line} (id {self.id!r})"

    @property
    def characters(self) -> int:
        """How long the record's text is (with a pair's query): what its cost is estimated from."""
        return len(self.text) + len(self.query or "")

    @cached_property  # once per record, however many chunk rows it makes
    def content_hash(self) -> str:
        """What the record's output depends on, as one digest (``content_hash.py``)."""
        return content_hash(self.text, self.chunk_spans, self.query)


@dataclass(frozen=True)
class RecordError:
    """One line of the job's error file."""

    id: str | None
    line: int
    code: str
    message: str

    def to_json(self) -> dict:
        return asdict(self)


def to_record(item: JsonlObject | JsonlLineError, id_field: str, text_field: str, spans_field: str = "chunk_spans",
              query_field: str | None = None, query_id_field: str | None = None,
              include_fields: tuple[str, ...] = ()) -> InputRecord | RecordError:
    """Validate one parsed line against the job's field names (``query_field``, ``query_id_field``:
    pairs and their optional group, for score jobs)."""
    if isinstance(item, JsonlLineError):
        return RecordError(None, item.line, item.code, item.message)
    line, value, unit = item.line, item.value, item.unit
    raw_id = value.get(id_field)
    if raw_id is None:
        return RecordError(None, line, "missing_id", f"{_where(unit, line)}: field {id_field!r} {_absent(value, id_field)}")
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
        return RecordError(None, line, "invalid_id", f"{_where(unit, line)}: field {id_field!r} must be a string or integer")
    record_id = str(raw_id)
    if not record_id or len(record_id) > MAX_ID_LENGTH:
        return RecordError(record_id[:MAX_ID_LENGTH] or None, line, "invalid_id",
                           f"{_where(unit, line)}: id must be 1..{MAX_ID_LENGTH} characters")
    if (control := CONTROL_CHARACTER.search(record_id)) is not None:
        return RecordError(None, line, "invalid_id", f"{_where(unit, line)}: id {ascii(record_id[:80])} contains "
                           f"control character U+{ord(control.group()):04X} at position {control.start()}")
    text = value.get(text_field)
    if text is None:
        return RecordError(record_id, line, "missing_text",
                           f"{_where(unit, line, record_id)}: field {text_field!r} {_absent(value, text_field)}")
    if not isinstance(text, str):
        return RecordError(record_id, line, "invalid_text",
                           f"{_where(unit, line, record_id)}: field {text_field!r} must be a string")
    if not text or text.isspace():  # no copy of a long text, as strip() would make
        what = "text is blank (only whitespace)" if text else "text is empty"
        return RecordError(record_id, line, "empty_text", f"{_where(unit, line, record_id)}: {what}")
    spans = value.get(spans_field)
    if spans is not None and not _is_span_list(spans):
        return RecordError(record_id, line, "invalid_chunk_spans",
                           f"{_where(unit, line, record_id)}: field {spans_field!r} must be a list of [start, end] integer pairs")
    query = query_id = None
    if query_field is not None:
        query = value.get(query_field)
        problem = _query_problem(query, query_field)
        if problem is None and query_id_field is not None:
            query_id, problem = _query_id(value.get(query_id_field), query_id_field)
        if problem is not None:
            code, message = problem
            return RecordError(record_id, line, code, f"{_where(unit, line, record_id)}: {message}")
    fields = None
    if include_fields:
        fields = {name: value.get(name) for name in include_fields}
        size = len(json_text(fields))
        if size > MAX_INCLUDED_BYTES:
            return RecordError(record_id, line, "fields_too_large", f"{_where(unit, line, record_id)}: the included fields "
                               f"({', '.join(include_fields)}) take {size} bytes as JSON; at most {MAX_INCLUDED_BYTES}")
    return InputRecord(record_id, text, line, spans, query, query_id, fields, unit)


def _where(unit: str, line: int, record_id: str | None = None) -> str:
    """Where an error is, as its message starts: ``line 7`` or ``line 7 (id 'doc-1')``; built only
    for a record that has an error."""
    return f"{unit} {line}" if record_id is None else f"{unit} {line} (id {record_id!r})"


def _absent(value: dict, name: str) -> str:
    """How a field without a value is described: there but null, or not there at all."""
    return "is null" if name in value else "is missing"


def _query_id(raw: object, field: str) -> tuple[str | None, tuple[str, str] | None]:
    """An optional group id: a string or integer like a record id (None when absent)."""
    if raw is None:
        return None, None
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        return None, ("invalid_query_id", f"field {field!r} must be a string or integer")
    query_id = str(raw)
    if not query_id or len(query_id) > MAX_ID_LENGTH or CONTROL_CHARACTER.search(query_id):
        return None, ("invalid_query_id", f"field {field!r} must be 1..{MAX_ID_LENGTH} characters, no control characters")
    return query_id, None


def _query_problem(query: object, query_field: str) -> tuple[str, str] | None:
    if query is None:
        return "missing_query", f"field {query_field!r} is missing (a score job's records are pairs)"
    if not isinstance(query, str):
        return "invalid_query", f"field {query_field!r} must be a string"
    if not query.strip():
        return "empty_query", f"field {query_field!r} is empty"
    return None


def _is_span_list(spans: object) -> bool:
    return isinstance(spans, list) and all(
        isinstance(span, list) and len(span) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in span)
        for span in spans
    )
