"""One contract, two implementations: every test runs against the local store and real S3 (SeaweedFS)."""
from urllib.parse import urlparse
from urllib.request import url2pathname

import httpx
import pytest

from poolq.storage import InvalidKeyError, ObjectExistsError, ObjectNotFoundError


def _read_url(url: str) -> bytes:
    if url.startswith("file://"):
        with open(url2pathname(urlparse(url).path), "rb") as handle:
            return handle.read()
    response = httpx.get(url, timeout=30)
    response.raise_for_status()
    return response.content


def test_put_then_get_round_trips_and_overwrites(store):
    store.put("a/b.bin", b"one")
    assert store.get("a/b.bin") == b"one"
    store.put("a/b.bin", b"two")
    assert store.get("a/b.bin") == b"two"


def test_missing_objects_raise_not_found(store):
    with pytest.raises(ObjectNotFoundError):
        store.get("nope/x")
    with pytest.raises(ObjectNotFoundError):
        store.open("nope/x")
    assert not store.exists("nope/x")


def test_conditional_write_keeps_the_first_object(store):
    store.put("c/marker", b"first", if_absent=True)
    with pytest.raises(ObjectExistsError):
        store.put("c/marker", b"second", if_absent=True)
    assert store.get("c/marker") == b"first"
    # put_once: the same, as a bool
    assert store.put_once("c/once", b"first") and not store.put_once("c/once", b"second")
    assert store.get("c/once") == b"first"


def test_list_is_sorted_and_scoped_to_the_prefix(store):
    for key in ["p/2", "p/1", "p/sub/3", "q/1", "pp/1"]:
        store.put(key, b"x")
    assert list(store.list("p/")) == ["p/1", "p/2", "p/sub/3"]


def test_delete_is_idempotent(store):
    store.put("d/x", b"x")
    store.delete("d/x")
    store.delete("d/x")
    assert not store.exists("d/x")


def test_open_streams_line_by_line(store):
    lines = [f'{{"n": {i}, "pad": "{"z" * 100}"}}\n'.encode() for i in range(20000)]  # ~2.3 MB
    store.put("big/lines.jsonl", b"".join(lines))
    with store.open("big/lines.jsonl") as stream:
        read = list(stream)
    assert read == lines


def test_unsafe_keys_are_refused(store):
    with pytest.raises(InvalidKeyError):
        store.put("../escape", b"x")


def test_uri_and_presigned_url_name_the_object(store):
    store.put("u/obj.txt", b"hello")
    assert store.uri("u/obj.txt").endswith("/u/obj.txt")
    assert _read_url(store.presigned_get_url("u/obj.txt", expires_s=60)) == b"hello"


def test_an_empty_object_does_not_disturb_the_next_requests(store):
    # Regression: with `Expect: 100-continue`, SeaweedFS left a stray response on the connection
    # after an empty PUT; the next conditional PUT then read it as a 412 for a brand-new key.
    store.put("e/empty", b"")
    store.put("e/new-marker", b"x", if_absent=True)
    assert store.get("e/empty") == b"" and store.get("e/new-marker") == b"x"


def test_a_fresh_store_has_no_pending_uploads(store):
    store.put("m/small", b"x")
    assert store.pending_uploads("") == [] and store.pending_uploads("m/") == []


def _multipart_store(new_buckets, prefix: str):
    """An S3 store on SeaweedFS going multipart above 5 MiB, in parts of 5 MiB, and the list of
    (part number, bytes) its uploads send."""
    import dataclasses

    config = dataclasses.replace(new_buckets.config, multipart_threshold_bytes=5 << 20, multipart_part_bytes=5 << 20)
    store = new_buckets.store(prefix, config)
    uploaded: list[tuple[int, int]] = []
    store.client.meta.events.register("before-parameter-build.s3.UploadPart",
                                      lambda params, **_: uploaded.append((params["PartNumber"], len(params["Body"]))))
    return store, uploaded


@pytest.mark.integration
def test_a_put_above_the_multipart_threshold_round_trips_and_leaves_no_upload_open(new_buckets):
    import os

    store, uploaded = _multipart_store(new_buckets, "multipart")
    data = os.urandom(11 << 20)  # three parts: 5 + 5 + 1 MiB
    store.put("big/part.parquet", data)
    assert [number for number, _ in uploaded] == [1, 2, 3]
    assert store.get("big/part.parquet") == data
    assert store.pending_uploads("") == []
    # A conditional write is never multipart: it stays a single conditional PUT, even when large
    marker = data[: 6 << 20]  # (an 11 MiB single PUT makes this SeaweedFS hang on SIGTERM at teardown)
    store.put("big/marker", marker, if_absent=True)
    with pytest.raises(ObjectExistsError):
        store.put("big/marker", b"second", if_absent=True)
    assert [number for number, _ in uploaded] == [1, 2, 3] and store.get("big/marker") == marker


def test_a_byte_range_reads_exactly_those_bytes_line_by_line(store):
    data = b"".join(f'{{"id": "{i}"}}\n'.encode() for i in range(1000))
    store.put("r/lines.jsonl", data)
    start, end = data.index(b'{"id": "10"}'), data.index(b'{"id": "990"}')
    with store.open_range("r/lines.jsonl", start, end) as stream:
        assert b"".join(stream) == data[start:end]
    with store.open_range("r/lines.jsonl", 5, 5) as stream:
        assert stream.read() == b""
    with pytest.raises(ObjectNotFoundError):
        store.open_range("nope/x", 0, 10)


def test_stat_gives_the_size_and_a_version_that_changes_with_the_content(store):
    store.put("s/obj", b"12345")
    first = store.stat("s/obj")
    assert first.size == 5 and first.version
    import time

    time.sleep(0.01)  # a local file's version is its mtime in ns: let the clock move
    store.put("s/obj", b"123456789")
    second = store.stat("s/obj")
    assert second.size == 9 and second.version != first.version
    with pytest.raises(ObjectNotFoundError):
        store.stat("nope/x")


def test_chunks_are_written_as_one_object(store):
    chunks = [f"line {i}\n".encode() for i in range(1000)]
    store.put_chunks("e/errors.jsonl", iter(chunks))
    assert store.get("e/errors.jsonl") == b"".join(chunks)
    store.put_chunks("e/empty.jsonl", iter([]))
    assert store.get("e/empty.jsonl") == b""


@pytest.mark.integration
def test_chunks_past_the_threshold_go_up_in_parts_as_they_fill(new_buckets):
    import os

    store, uploaded = _multipart_store(new_buckets, "chunks")
    chunks = [os.urandom(1 << 20) for _ in range(11)]  # 11 MiB in 1 MiB chunks: parts of 5, 5, 1 MiB
    store.put_chunks("big/errors.jsonl", iter(chunks))
    assert [size for _, size in uploaded] == [5 << 20, 5 << 20, 1 << 20]
    assert store.get("big/errors.jsonl") == b"".join(chunks) and store.pending_uploads("") == []
