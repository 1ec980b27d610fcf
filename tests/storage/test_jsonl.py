import io

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
