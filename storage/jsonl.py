"""Streaming JSONL reading: strict UTF-8, one JSON object per line, errors by line number.

Whatever the bytes, reading never raises: each line is an object or an error naming the line,
and reading goes on with the next line. Gzip-compressed JSONL is read as such (detected from
its first bytes, whatever the object's name); a UTF-8 byte-order mark on line 1 is skipped.
"""
from __future__ import annotations

import json
import re
import sys
import zlib
from dataclasses import dataclass
from typing import BinaryIO, ClassVar, Iterator

from poolq.storage.bounded_lines import BoundedLines, LongLine, TooCompressed
from poolq.storage.input_limits import INPUT_TOO_COMPRESSED, RECORD_TOO_LARGE, InputLimits
from poolq.storage.json_errors import describe_json_error

_BOM = "\ufeff"
# A \uD800..\uDFFF escape: json.loads turns a lone one into a str that cannot be encoded as UTF-8
# (a valid pair becomes one character). Only lines holding such an escape are searched further.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class JsonlObject:
    """One well-formed line."""

    unit: ClassVar[str] = "line"  # what ``line`` counts, in messages (a Parquet row says "row")
    line: int  # 1-based
    value: dict
    # Where the line's bytes are in the object, newline included: what a shard names instead of a
    # copy. None for a gzip-compressed object, whose lines no byte range of the object addresses.
    offset: int | None = None
    size: int = 0


@dataclass(frozen=True)
class JsonlLineError:
    """One line that is not a JSON object in UTF-8; reading goes on with the next line."""

    unit: ClassVar[str] = "line"
    line: int  # 1-based
    # invalid_utf8 | invalid_json | not_an_object | invalid_unicode | invalid_gzip | record_too_large
    # | input_too_compressed (the last two only where ``read_jsonl`` has limits)
    code: str
    message: str


@dataclass
class JsonlProgress:
    """How far a ``read_jsonl`` got: lines read (blank ones too) and bytes (decompressed)."""

    lines: int = 0
    bytes: int = 0


def read_jsonl(stream: BinaryIO, first_line: int = 1, start_offset: int = 0, progress: JsonlProgress | None = None,
               limits: InputLimits | None = None) -> Iterator[JsonlObject | JsonlLineError]:
    """Yield each non-blank line as an object or an error. Never holds more than one line.

    ``first_line`` and ``start_offset`` number the lines and bytes of a stream that begins inside
    an object (a byte range of it); ``progress``, if given, is kept up to date as lines are read.
    ``limits`` (an untrusted input's): a line over ``max_record_bytes`` is never held, it is that
    line's ``record_too_large`` error; a gzip bomb ends reading with an ``input_too_compressed`` one."""
    reader = BoundedLines(stream, limits)
    lines = iter(reader)
    number = first_line - 1
    offset = start_offset
    progress = progress if progress is not None else JsonlProgress()
    while True:
        try:
            raw = next(lines)
        except StopIteration:
            return
        except TooCompressed as exc:
            yield JsonlLineError(number + 1, INPUT_TOO_COMPRESSED, f"line {number + 1}: {exc}; nothing from here on was read")
            return
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            yield JsonlLineError(number + 1, "invalid_gzip",
                                 f"line {number + 1}: the gzip stream is corrupt or truncated ({exc}); "
                                 "nothing after it could be read")
            return
        number += 1
        size = raw.size if isinstance(raw, LongLine) else len(raw)
        progress.lines += 1
        progress.bytes += size
        item = _long_line_error(raw, number, limits) if isinstance(raw, LongLine) else (
            parse_jsonl_line(raw, number, at_start=offset == 0))
        if isinstance(item, JsonlObject) and not reader.compressed:
            item = JsonlObject(item.line, item.value, offset, size)
        offset += size
        if item is not None:
            yield item


def _long_line_error(line: LongLine, number: int, limits: InputLimits | None) -> JsonlLineError:
    detail = limits.too_large(line.size, "the line holds") if limits is not None else f"the line holds {line.size} bytes"
    return JsonlLineError(number, RECORD_TOO_LARGE, f"line {number}: {detail}; it was skipped, never held whole")


def parse_jsonl_line(raw: bytes, number: int, at_start: bool | None = None) -> JsonlObject | JsonlLineError | None:
    """One line (``number`` is 1-based) as an object or an error; None for a blank line.

    ``at_start``: the line begins the object (only there can a byte order mark be); by default,
    line 1 does. A byte range read from inside an object passes False for its first line."""
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        return JsonlLineError(number, "invalid_utf8", f"line {number}: invalid UTF-8 at byte {exc.start}")
    if (number == 1 if at_start is None else at_start) and text.startswith(_BOM):
        text = text[1:]
    if not text or text.isspace():  # a blank line; no copy of a long line, as strip() would make
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return JsonlLineError(number, "invalid_json", f"line {number}: invalid JSON: {describe_json_error(exc, text)}")
    except RecursionError:
        return JsonlLineError(number, "invalid_json", f"line {number}: invalid JSON: nested too deeply")
    except ValueError:  # the one other ValueError json.loads raises: an integer past Python's digit limit
        return JsonlLineError(number, "invalid_json",
                              f"line {number}: invalid JSON: a number of more than {sys.get_int_max_str_digits()} digits")
    if nested_too_deeply(value, text):
        return JsonlLineError(number, "invalid_json", f"line {number}: invalid JSON: nested too deeply")
    if not isinstance(value, dict):
        return JsonlLineError(number, "not_an_object", f"line {number}: expected a JSON object, got {type(value).__name__}")
    if _SURROGATE_ESCAPE.search(text) and (where := lone_surrogate_path(value)) is not None:
        return JsonlLineError(number, "invalid_unicode",
                              f"line {number}: {where} holds a lone UTF-16 surrogate escape, which is no character")
    return JsonlObject(number, value)


# Deeper JSON is refused whatever the interpreter's recursion limit, which bounds json.loads alone:
# torch's compiler raises it to 2,000 in a process that compiles (engine/models/fused_norm.py).
MAX_JSON_DEPTH = 500


def nested_too_deeply(value: object, text: str) -> bool:
    """Whether ``value`` (parsed from ``text``) nests arrays and objects deeper than MAX_JSON_DEPTH."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:  # too few brackets to: the common case, at C speed
        return False
    pending = [(value, 1)]
    while pending:
        current, depth = pending.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        if isinstance(current, dict):
            pending.extend((item, depth + 1) for item in current.values())
        elif isinstance(current, list):
            pending.extend((item, depth + 1) for item in current)
    return False


def lone_surrogate_path(value: object, path: str = "") -> str | None:
    """Where in a parsed JSON value a string (or key) holds a lone surrogate, e.g. ``field 'text'``."""
    pending = [(value, path)]
    while pending:  # iterative: a parsed value may be nested as deep as json.loads allows
        current, where = pending.pop()
        if isinstance(current, str):
            if _SURROGATE.search(current):
                return where or "the value"
        elif isinstance(current, dict):
            for key, item in current.items():
                name = key if key.isascii() and key.isidentifier() else ascii(key)
                label = f"field {ascii(key)}" if not where else f"{where}.{name}"
                if _SURROGATE.search(key):
                    return f"a field name ({ascii(key)})"
                pending.append((item, label))
        elif isinstance(current, list):
            pending.extend((item, f"{where or 'the value'}[{index}]") for index, item in enumerate(current))
    return None


def dump_jsonl(rows: list[dict]) -> bytes:
    """Serialize rows as JSONL (UTF-8, one object per line)."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
