"""Streaming JSONL reading: strict UTF-8, one JSON object per line, errors by line number."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import BinaryIO, Iterator


@dataclass(frozen=True)
class JsonlObject:
    """One well-formed line."""

    line: int  # 1-based
    value: dict


@dataclass(frozen=True)
class JsonlLineError:
    """One line that is not a JSON object in UTF-8; reading goes on with the next line."""

    line: int  # 1-based
    code: str  # invalid_utf8 | invalid_json | not_an_object
    message: str


def read_jsonl(stream: BinaryIO) -> Iterator[JsonlObject | JsonlLineError]:
    """Yield each non-blank line as an object or an error. Never holds more than one line."""
    for number, raw in enumerate(stream, start=1):
        try:
            text = raw.decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            yield JsonlLineError(number, "invalid_utf8", f"line {number}: invalid UTF-8 at byte {exc.start}")
            continue
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            yield JsonlLineError(number, "invalid_json", f"line {number}: invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(value, dict):
            yield JsonlLineError(number, "not_an_object", f"line {number}: expected a JSON object, got {type(value).__name__}")
            continue
        yield JsonlObject(number, value)


def dump_jsonl(rows: list[dict]) -> bytes:
    """Serialize rows as JSONL (UTF-8, one object per line)."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
