import io

import pytest

from poolq.storage import JsonlLineError, JsonlObject, dump_jsonl, read_jsonl


def test_streams_objects_and_reports_bad_lines_by_number():
    data = b'{"id": "a"}\n\n{"id": \n\xff\xfe\n[1, 2]\n{"id": "b"}'
    items = list(read_jsonl(io.BytesIO(data)))
    assert [type(i) for i in items] == [JsonlObject, JsonlLineError, JsonlLineError, JsonlLineError, JsonlObject]
    assert [(i.line, getattr(i, "code", None)) for i in items] == [
        (1, None), (3, "invalid_json"), (4, "invalid_utf8"), (5, "not_an_object"), (6, None),
    ]
    assert items[1].message.startswith("line 3: invalid JSON")


def test_round_trips_unicode():
    rows = [{"id": "ü", "text": "naïve — 東京"}]
    (item,) = read_jsonl(io.BytesIO(dump_jsonl(rows)))
    assert item.value == rows[0]


@pytest.mark.parametrize("line, says", [
    (b'{"id": "a", "text": "a quote never closed\n', "unterminated string: the string opened at column 21 is not "
                                                     "closed before the line ends"),
    (b'{"id": "a", "text": "closed on the next line\r\n', "unterminated string: the string opened at column 21"),
    (b'{"id": "a" "text": "x"}\n', "missing comma at column 12: expected ',' or a closing bracket after a value"),
    (b'{"id": "a", "text": ["x" "y"]}\n', "missing comma at column 26"),
    (b'{"id" "a"}\n', "missing colon at column 7: expected ':' after a field name"),
    (b'{"id": "a",}\n', "expected a field name in double quotes at column 12 (a comma before a closing brace"),
    (b'{id: "a"}\n', "expected a field name in double quotes at column 2"),
    (b'{"id": "a", "text":\n', "the line ends after column 19 before the JSON value does (cut short?)"),
    (b'{"id": "a", "text": nope}\n', "expected a value at column 21"),
    (b'{"id": "a"} {"id": "b"}\n', "more text after the JSON object ends, at column 13 (one object per line)"),
    (b'{"id": "a", "text": "raw\ttab"}\n', "a raw control character U+0009 inside a string at column 25"),
])
def test_a_json_error_says_what_is_wrong_in_words_and_where(line, says):
    (item,) = read_jsonl(io.BytesIO(line))
    assert isinstance(item, JsonlLineError)
    assert item.code == "invalid_json" and item.message.startswith("line 1: invalid JSON: " + says), item.message
    assert "Invalid control character" not in item.message and "delimiter" not in item.message


@pytest.fixture
def compiling_process_recursion_limit():
    """The limit torch's compiler leaves a process at (torch/_inductor/compile_fx.py): 2,000."""
    import sys

    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, 2_000))
    yield
    sys.setrecursionlimit(before)


def test_deep_nesting_is_refused_whatever_the_recursion_limit(compiling_process_recursion_limit):
    deep = b'{"id": "a", "text": "x", "n": ' + b"[" * 1_000 + b"]" * 1_000 + b"}\n"
    good = b'{"id": "b", "text": "y", "n": ' + b"[" * 400 + b"]" * 400 + b"}\n"  # deep, but within the limit
    first, second = read_jsonl(io.BytesIO(deep + good))
    assert isinstance(first, JsonlLineError) and first.code == "invalid_json" and "nested too deeply" in first.message
    assert isinstance(second, JsonlObject) and second.value["id"] == "b"
