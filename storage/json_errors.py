"""What is wrong with a line that is not JSON, in words, and where (its column).

``json`` says ``Invalid control character at`` for a string that runs to the end of the line (the
line's newline is the control character) and ``Expecting ',' delimiter`` for a missing comma; a
person reading an error file wants "unterminated string" and "missing comma".
"""
from __future__ import annotations

import json


def describe_json_error(exc: json.JSONDecodeError, text: str) -> str:
    """``exc`` (from ``json.loads(text)``) as a phrase naming the problem and its column."""
    column = exc.pos + 1  # a character column of the line (colno would restart after its line break)
    if exc.msg == "Invalid control character at":
        if text[exc.pos] in "\r\n":  # the string ran into the end of the line
            return _unterminated(text.rstrip("\r\n"), column)
        return (f"a raw control character U+{ord(text[exc.pos]):04X} inside a string at column {column} "
                "(write it escaped, e.g. \\t or \\n)")
    if exc.msg.startswith("Unterminated string"):
        return f"unterminated string: the string opened at column {column} is not closed before the line ends"
    if exc.msg == "Expecting ',' delimiter":
        return f"missing comma at column {column}: expected ',' or a closing bracket after a value"
    if exc.msg == "Expecting ':' delimiter":
        return f"missing colon at column {column}: expected ':' after a field name"
    if exc.msg == "Expecting property name enclosed in double quotes":
        return (f"expected a field name in double quotes at column {column} "
                "(a comma before a closing brace, or a name without quotes?)")
    if exc.msg == "Expecting value":
        if not text[exc.pos:].strip():
            return f"the line ends after column {len(text.rstrip())} before the JSON value does (cut short?)"
        return f"expected a value at column {column} (a string in double quotes, a number, true, false, null, {{ or [)"
    if exc.msg == "Extra data":
        return f"more text after the JSON object ends, at column {column} (one object per line)"
    return f"{exc.msg} (column {column})"


def _unterminated(text: str, column: int) -> str:
    """The message for a string that is not closed before the line ends (its opening column, found
    by parsing the line without its line break)."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Unterminated string"):
            return describe_json_error(exc, text)
    return f"unterminated string: a string is not closed before the line ends (column {column})"
