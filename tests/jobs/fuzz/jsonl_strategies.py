"""Hypothesis strategies for hostile JSONL input, and an oracle that says, independently of
``poolq.storage.jsonl`` and ``poolq.jobs.inputs.records``, what each line must become.

The oracle re-derives the documented contract from first principles (strict UTF-8, a BOM skipped
on line 1 only, one JSON object per line, no lone surrogate anywhere, id a string or integer of
1..512 characters without control characters, text a non-blank string, chunk_spans a list of
integer pairs); it never calls the code under test.

Nesting depth: ``json.loads`` refuses nesting near the interpreter's recursion limit, and where
exactly depends on the caller's stack depth. Generated values are therefore kept shallow and the
hand-built deep lines are far past the limit (1,000+ levels on a 1,000-frame limit), so the
oracle and the reader can never disagree because they were called at different stack depths.
"""
from __future__ import annotations

import gzip
import io
import json
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

MAX_ID_LENGTH = 512
BOM = b"\xef\xbb\xbf"
GZIP_MAGIC = b"\x1f\x8b"

# Bounded, reproducible runs: the same examples on every run (derandomize), nothing written to
# a .hypothesis/ directory (no database), no timing checks (deadline=None).
COMMON_SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.large_base_example],
)


def fuzz_settings(max_examples: int) -> settings:
    return settings(max_examples=max_examples, **COMMON_SETTINGS)


# -- strings -------------------------------------------------------------------------------
ODD_STRINGS = [
    "\u0301\u0301\u0301",  # combining marks only: no token once tokenized
    "\u20dd\u0300",  # enclosing + combining
    "e\u0301",  # a base letter with a combining accent
    "\ufeff",  # BOM / zero-width no-break space
    "\u200b\u200c\u200d",  # zero-width characters
    "\u2028\u2029",  # line / paragraph separators (not line breaks for JSONL)
    "\u202e\u202d",  # bidi overrides
    "\uffff\ufffe",  # non-characters
    "\U0010ffff",  # the last code point
    "\U0001f600\U0001f3f3\ufe0f\u200d\U0001f308",  # emoji with ZWJ
    "\ue000",  # private use
    "日本語のテキスト",
    "Straße naïve café",
    "\x00", "\x1f", "\x7f", "\x85", "\x9f",  # control characters (C0, DEL, C1)
    "\x1c\x1d\x1e",  # str.isspace() says these are whitespace
    "\u00a0\u3000",  # non-breaking and ideographic spaces
    " \t ", "", "\r",
    "\\ud800",  # a backslash then "ud800": six ordinary characters, not a surrogate
    "a" * MAX_ID_LENGTH, "b" * (MAX_ID_LENGTH + 1),
]
LONE_SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]

odd_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(ODD_STRINGS),
    st.text(st.characters(categories=["Mn", "Me", "Cf", "Zs", "Zl", "Zp", "Co", "Cc"]), min_size=1, max_size=6),
)
# A Python str holding a lone surrogate: json.dumps(ensure_ascii=True) writes it as a \uXXXX escape,
# ensure_ascii=False (encoded with surrogatepass) as CESU-8 bytes, which are not UTF-8.
surrogate_text = st.builds(lambda a, s, b: a + s + b, st.text(max_size=3), st.sampled_from(LONE_SURROGATES),
                           st.text(max_size=3))
# Ids that are valid (no control characters, no surrogates, 1..20 characters) and texts that are
# real words, which the MiniLM tokenizer keeps.
valid_id_text = st.text(st.characters(exclude_categories=["Cs", "Cc"]), min_size=1, max_size=20)
WORDS = ["alpha", "river", "mountain", "naïve", "Straße", "café", "кошка", "日本", "λόγος", "über", "données",
         "embedding", "queue", "zebra", "42", "ﬁne"]
word_text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)

# -- JSON values ---------------------------------------------------------------------------
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(),
    st.integers(min_value=-(10 ** 600), max_value=10 ** 600),  # long, but under Python's 4,300-digit limit
    st.floats(allow_nan=True, allow_infinity=True),  # json.dumps writes NaN / Infinity, which json.loads reads
    odd_text, surrogate_text,
)
json_keys = st.one_of(st.sampled_from(["id", "text", "chunk_spans", "meta"]), odd_text, surrogate_text)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(json_keys, children, max_size=4),
    max_leaves=10,
)

id_values = st.one_of(
    valid_id_text, st.integers(), st.integers(min_value=-(10 ** 520), max_value=10 ** 520),
    st.booleans(), st.none(), st.floats(), st.sampled_from(["", "a" * 512, "a" * 513, "x\ny", "tab\there", "del\x7f"]),
    odd_text, surrogate_text, json_values,
)
text_values = st.one_of(word_text, odd_text, surrogate_text, st.none(), st.integers(), st.booleans(), json_values)
span_values = st.one_of(
    st.lists(st.lists(st.integers(min_value=-5, max_value=50), min_size=2, max_size=2), max_size=3),
    st.just([[True, 1]]), st.just([[0, 1.5]]), st.just([[0, 1, 2]]), st.just("nope"), json_values,
)


@st.composite
def record_like(draw) -> dict:
    """A dict shaped like a record, each field right, wrong, or absent."""
    record: dict = {}
    if draw(st.integers(0, 9)) > 0:
        record["id"] = draw(id_values)
    if draw(st.integers(0, 9)) > 0:
        record["text"] = draw(text_values)
    if draw(st.booleans()) and draw(st.booleans()):
        record["chunk_spans"] = draw(span_values)
    extras = draw(st.dictionaries(json_keys.filter(lambda k: k not in ("id", "text", "chunk_spans")), json_values,
                                  max_size=2))
    return {**extras, **record} if draw(st.booleans()) else {**record, **extras}


def dump_line(value: object, ensure_ascii: bool, compact: bool) -> bytes:
    """``value`` as one JSON text; lone surrogates as escapes (ensure_ascii) or CESU-8 bytes."""
    separators = (",", ":") if compact else None
    return json.dumps(value, ensure_ascii=ensure_ascii, separators=separators).encode("utf-8", "surrogatepass")


def serialized(values: st.SearchStrategy) -> st.SearchStrategy[bytes]:
    return st.builds(dump_line, values, st.booleans(), st.booleans())


# -- hand-built lines ----------------------------------------------------------------------
def nested(depth: int, opener: str = "[", closer: str = "]", inner: str = "") -> str:
    return opener * depth + inner + closer * depth


DEEP_LINES = [
    nested(1_000),
    nested(100_000),
    nested(5_000, '{"a":', "}", "1"),
    "[" * 100_000,  # unbalanced
    '{"id": "deep", "text": "x", "n": ' + nested(1_000) + "}",
    '{"id": "deeper", "text": "x", "n": ' + nested(100_000, '{"k":', "}", "0") + "}",
    '{"id": "shallow-nest", "text": "fine words", "n": ' + nested(50) + "}",  # a valid record
]
RAW_TEXT_LINES = [
    # numbers past Python's 4,300-digit int limit, and just at it
    '{"id": ' + "1" * 5_000 + ', "text": "x"}',
    '{"id": "bignum", "text": "x", "n": ' + "9" * 5_000 + "}",
    '{"id": ' + "7" * 4_300 + ', "text": "x"}',  # parses; too long as an id
    '{"id": "' + "7" * 512 + '", "text": "longest id"}',
    '{"id": ' + "1" + "0" * 511 + ', "text": "a 512-digit integer id"}',
    '{"id": 1e400, "text": "x"}', '{"id": "f", "text": "x", "n": -1e400}',
    # surrogate escapes written as JSON text
    '{"id": "sur", "text": "ab\\ud800cd"}',
    '{"id": "\\udfff", "text": "x"}',
    '{"id": "pair", "text": "a proper pair \\ud83d\\ude00"}',  # one character: valid
    '{"id": "reversed", "text": "\\ude00\\ud83d"}',
    '{"id": "upper", "text": "\\uD800"}',
    '{"\\ud800": 1, "id": "key", "text": "x"}',
    '{"id": "nested-sur", "text": "x", "meta": [{"k": ["\\udbff"]}]}',
    '{"id": "escaped-backslash", "text": "\\\\ud800 is six characters"}',  # valid
    '["\\ud800"]',
    # wrong types and values
    '{"id": true, "text": "x"}', '{"id": false, "text": "x"}', '{"id": 1.5, "text": "x"}', '{"id": 1e3, "text": "x"}',
    '{"id": [1], "text": "x"}', '{"id": {"a": 1}, "text": "x"}', '{"id": null, "text": "x"}', '{"text": "no id"}',
    '{"id": "", "text": "x"}', '{"id": "a\\u0000b", "text": "x"}', '{"id": "a\\u0085b", "text": "x"}',
    '{"id": "nl\\nid", "text": "x"}', '{"id": -0, "text": "minus zero"}', '{"id": -17, "text": "negative"}',
    '{"id": "t1", "text": 5}', '{"id": "t2", "text": null}', '{"id": "t3"}', '{"id": "t4", "text": "   "}',
    '{"id": "t5", "text": ["a"]}', '{"id": "t6", "text": "\\u0301\\u0301\\u0301"}',
    '{"id": "t7", "text": "x", "chunk_spans": [[0, 1]]}', '{"id": "t8", "text": "x", "chunk_spans": [[true, 1]]}',
    '{"id": "t9", "text": "x", "chunk_spans": null}', '{"id": "dup-key", "id": "dup-key-2", "text": "x"}',
    # not objects
    "[]", '"a string"', "1", "null", "true", "NaN", "-Infinity", "[{}]",
    # not JSON
    "{", "}", '{"id": "a",}', "{'id': 'a', 'text': 'x'}", '{"id": "a", "text": "x"} trailing',
    '{"id": "a", "text": "x"}{"id": "b", "text": "y"}', '{"id": "a" "text": "x"}', "undefined", '"\\x41"',
    '{"id": "ctl", "text": "raw\ttab"}',  # a raw control character inside a JSON string is invalid JSON
]
RAW_BYTE_LINES = [
    BOM + b'{"id": "bom", "text": "after a byte-order mark"}',
    BOM, BOM + BOM + b"{}", BOM + b"  ",
    b"\xff\xfe{}", b'{"id": "\xc3", "text": "x"}', b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80",
    b'{"id": "cesu", "text": "\xed\xa0\x80"}', GZIP_MAGIC + b"\x08\x00",
    b"", b"   ", b"\t", b"\r", b"\x0b\x0c", "\u00a0".encode(), "\u3000".encode(), "\x1c".encode(), "\x85".encode(),
    "\u2028".encode(),
]
HAND_LINES = [line.encode("utf-8") for line in DEEP_LINES + RAW_TEXT_LINES] + RAW_BYTE_LINES

garbage_line = st.one_of(
    st.binary(max_size=40),
    st.sampled_from(HAND_LINES),
    serialized(json_values),
    serialized(record_like()),
    # pretty-printed JSON spans several lines: each is its own (invalid) line
    st.builds(lambda v: json.dumps(v, indent=1).encode("utf-8", "surrogatepass"), st.dictionaries(json_keys, json_scalars,
                                                                                                  max_size=3)),
)
any_line = st.one_of(serialized(record_like()), garbage_line,
                     serialized(st.fixed_dictionaries({"id": valid_id_text, "text": word_text})))


@st.composite
def jsonl_files(draw, lines: st.SearchStrategy[bytes] = any_line, max_lines: int = 25) -> bytes:
    """A whole file: lines joined by LF or CRLF, maybe a BOM first, maybe no final newline."""
    chosen = draw(st.lists(lines, max_size=max_lines))
    newline = draw(st.sampled_from([b"\n", b"\r\n"]))
    content = newline.join(chosen)
    if chosen and draw(st.booleans()):
        content += newline
    if draw(st.integers(0, 4)) == 0:
        content = BOM + content
    if content.startswith(GZIP_MAGIC):  # would be read as a (corrupt) gzip stream: not what this checks
        content = b"\n" + content
    return content


class TrickleStream(io.RawIOBase):
    """A stream that hands out at most ``step`` bytes per read, as a slow network body would."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data, self._step, self._at = data, step, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        count = self._step if size is None or size < 0 else min(size, self._step)
        chunk = self._data[self._at:self._at + count]
        self._at += len(chunk)
        return chunk

    def readinto(self, buffer) -> int:
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def gzipped(content: bytes) -> bytes:
    return gzip.compress(content, mtime=0)


# -- the oracle ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Expected:
    """What one non-blank line must become: a record (``code`` None) or an error with ``code``."""

    line: int
    code: str | None
    id: str | None = None
    text: str | None = None

    @property
    def is_record(self) -> bool:
        return self.code is None


LINE_CODES = {"invalid_utf8", "invalid_json", "not_an_object", "invalid_unicode"}


def split_lines(content: bytes) -> list[bytes]:
    """Binary lines, split on LF only (CR stays in the line), a final LF ending the last line."""
    if not content:
        return []
    pieces = content.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    return pieces


def _has_surrogate(value: object) -> bool:
    pending = [value]
    while pending:
        current = pending.pop()
        if isinstance(current, str):
            if any(0xD800 <= ord(c) <= 0xDFFF for c in current):
                return True
        elif isinstance(current, dict):
            pending.extend(current.keys())
            pending.extend(current.values())
        elif isinstance(current, list):
            pending.extend(current)
    return False


# The reader refuses values nested deeper than this (a value is 1 deep, an item of it 2, ...) whatever
# the interpreter's recursion limit, which alone decides how deep json.loads goes.
MAX_DEPTH = 500


def _deepest(value: object) -> int:
    deepest, pending = 0, [(value, 1)]
    while pending:
        current, depth = pending.pop()
        deepest = max(deepest, depth)
        children = current.values() if isinstance(current, dict) else current if isinstance(current, list) else ()
        pending.extend((child, depth + 1) for child in children)
    return deepest


def _is_control(c: str) -> bool:
    return ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def expect_line(raw: bytes, number: int) -> Expected | None:
    """The oracle for one line (``number`` 1-based); None for a blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Expected(number, "invalid_utf8")
    if number == 1 and text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return Expected(number, "invalid_json")
    if _deepest(value) > MAX_DEPTH:
        return Expected(number, "invalid_json")
    if not isinstance(value, dict):
        return Expected(number, "not_an_object")
    if _has_surrogate(value):
        return Expected(number, "invalid_unicode")
    raw_id = value.get("id")
    if raw_id is None:
        return Expected(number, "missing_id")
    if not (isinstance(raw_id, str) or _is_int(raw_id)):
        return Expected(number, "invalid_id")
    record_id = str(raw_id)
    if not 1 <= len(record_id) <= MAX_ID_LENGTH or any(_is_control(c) for c in record_id):
        return Expected(number, "invalid_id")
    text_value = value.get("text")
    if text_value is None:
        return Expected(number, "missing_text", record_id)
    if not isinstance(text_value, str):
        return Expected(number, "invalid_text", record_id)
    if not text_value.strip():
        return Expected(number, "empty_text", record_id)
    spans = value.get("chunk_spans")
    if spans is not None and not (isinstance(spans, list) and all(
            isinstance(span, list) and len(span) == 2 and all(_is_int(v) for v in span) for span in spans)):
        return Expected(number, "invalid_chunk_spans", record_id)
    return Expected(number, None, record_id, text_value)


def expect_file(content: bytes) -> list[Expected]:
    """Every non-blank line of ``content`` as the oracle sees it, in order (no duplicate check)."""
    out = []
    for number, raw in enumerate(split_lines(content), start=1):
        expected = expect_line(raw, number)
        if expected is not None:
            out.append(expected)
    return out


def expect_job(content: bytes) -> list[Expected]:
    """As ``expect_file``, and a record whose id (as text) came before is a duplicate_id error."""
    seen: set[str] = set()
    out = []
    for expected in expect_file(content):
        if expected.is_record:
            if expected.id in seen:
                expected = Expected(expected.line, "duplicate_id", expected.id)
            else:
                seen.add(expected.id)
        out.append(expected)
    return out
