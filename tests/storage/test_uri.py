import pytest

from poolq.storage import InvalidKeyError, InvalidURIError, join_key, parse_uri, validate_key


def test_parses_s3_and_file_uris():
    target = parse_uri("s3://bucket/a/b.jsonl")
    assert (target.scheme, target.container, target.key) == ("s3", "bucket", "a/b.jsonl")
    target = parse_uri("file:///tmp/x/in.jsonl")
    assert (target.scheme, target.container, target.key) == ("file", "/tmp/x", "in.jsonl")


@pytest.mark.parametrize("uri", ["s3://bucket", "s3:///key", "http://host/x", "s3://b/../x", "s3://b/a//c", "file://host/x", "ftp://x/y"])
def test_rejects_malformed_uris(uri):
    with pytest.raises(InvalidURIError):
        parse_uri(uri)


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "a//b", "./a", "a\\b"])
def test_rejects_unsafe_keys(key):
    with pytest.raises(InvalidKeyError):
        validate_key(key)


def test_join_key_ignores_empty_parts():
    assert join_key("", "jobs/", "/abc", "x.json") == "jobs/abc/x.json"
