"""The files of the Files API over both stores (local directory, real SeaweedFS S3): streamed in,
read back, listed by cursor, deleted; a file over the limit leaves nothing behind."""
import io
import types

import pytest

from poolq.jobs.ledger.layout import ServiceLayout
from poolq.products.batches.batch_files import (
    FileNotFound,
    FileTooLarge,
    create_file,
    delete_file,
    get_file,
    list_files,
    open_file_content,
)
from poolq.storage import LocalObjectStore, S3Config

MiB = 1 << 20


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.integration)])
def ctx(request, tmp_path):
    if request.param == "local":
        store = LocalObjectStore(tmp_path / "store")
    else:
        buckets = request.getfixturevalue("new_buckets")
        # a 5 MiB multipart threshold: the 6 MiB file below goes up in parts
        config = S3Config(buckets.config.endpoint_url, buckets.config.access_key_id,
                          buckets.config.secret_access_key, multipart_threshold_bytes=5 * MiB,
                          multipart_part_bytes=5 * MiB)
        store = buckets.store("files", config)
    return types.SimpleNamespace(store=store, service_layout=ServiceLayout("jobs"))


def test_a_file_streams_in_and_reads_back(ctx):
    content = b"".join(b'{"custom_id": "%d"}\n' % i for i in range(330_000))  # about 6 MiB
    created = create_file(ctx, "acme", "in\x00put.jsonl", "batch", io.BytesIO(content), max_bytes=8 * MiB)
    assert (created.bytes, created.filename, created.purpose) == (len(content), "in_put.jsonl", "batch")
    assert get_file(ctx, "acme", created.id) == created
    with open_file_content(ctx, "acme", created.id) as stream:
        assert stream.read() == content
    with pytest.raises(FileNotFound):
        get_file(ctx, "other-tenant", created.id)


def test_a_file_over_the_limit_leaves_nothing(ctx):
    with pytest.raises(FileTooLarge, match="larger than 1048576 bytes"):
        create_file(ctx, "acme", "big.jsonl", "batch", io.BytesIO(b"x" * (MiB + 1)), max_bytes=MiB)
    assert list_files(ctx, "acme").data == [] and list(ctx.store.list("jobs/")) == []


def test_files_list_by_cursor_newest_first_and_by_purpose(ctx):
    made = [create_file(ctx, "acme", f"{i}.jsonl", "batch", io.BytesIO(b"{}\n"), max_bytes=MiB).id for i in range(5)]
    first = list_files(ctx, "acme", limit=2)
    assert [f.id for f in first.data] == made[:-3:-1] and first.has_more and first.last_id == made[3]
    rest = list_files(ctx, "acme", limit=10, after=first.last_id)
    assert [f.id for f in rest.data] == made[2::-1] and not rest.has_more
    assert [f.id for f in list_files(ctx, "acme", order="asc", limit=10).data] == made
    assert list_files(ctx, "acme", purpose="batch_output").data == []


def test_delete_removes_record_and_content(ctx):
    created = create_file(ctx, "acme", "a.jsonl", "batch", io.BytesIO(b"{}\n"), max_bytes=MiB)
    assert delete_file(ctx, "acme", created.id).deleted
    with pytest.raises(FileNotFound):
        open_file_content(ctx, "acme", created.id)
    with pytest.raises(FileNotFound):
        delete_file(ctx, "acme", created.id)
    assert list(ctx.store.list("jobs/")) == []


@pytest.mark.parametrize("file_id", ["file-../../x", "file-" + "A" * 32, "../jobs", ""])
def test_ids_that_are_not_file_ids_are_never_keys(ctx, file_id):
    with pytest.raises(FileNotFound):
        get_file(ctx, "acme", file_id)


def test_expiring_files_read_as_gone_at_their_time_and_the_sweep_deletes_them_soonest_first(ctx, monkeypatch):
    from poolq.products.batches import batch_files
    from poolq.products.batches.file_expiry import delete_expired_files

    clock = {"now": 1_800_000_000.0}  # the files' clock only: S3 request signing keeps the real one
    monkeypatch.setattr(batch_files, "time", types.SimpleNamespace(time=lambda: clock["now"]))
    # Given a file expiring in an hour, one in two hours, one kept
    soon = create_file(ctx, "t1", "soon.jsonl", "batch", io.BytesIO(b"a\n"), max_bytes=MiB, expires_after_s=3600)
    later = create_file(ctx, "t1", "later.jsonl", "batch", io.BytesIO(b"b\n"), max_bytes=MiB, expires_after_s=7200)
    kept = create_file(ctx, "t2", "kept.jsonl", "batch", io.BytesIO(b"c\n"), max_bytes=MiB)
    assert (soon.expires_at, later.expires_at, kept.expires_at) == (1_800_003_600, 1_800_007_200, None)
    assert delete_expired_files(ctx, clock["now"]) == 0
    # When the first hour has passed
    clock["now"] += 3600
    # Then that file reads as deleted at once, and the sweep removes it and only it
    with pytest.raises(FileNotFound):
        get_file(ctx, "t1", soon.id)
    assert [f.id for f in list_files(ctx, "t1").data] == [later.id]
    assert delete_expired_files(ctx, clock["now"]) == 1
    assert open_file_content(ctx, "t1", later.id).read() == b"b\n"
    clock["now"] += 3600
    assert delete_expired_files(ctx, clock["now"]) == 1
    # And the store holds the kept file's objects, nothing of the others (markers included)
    remaining = list(ctx.store.list("jobs/"))
    assert len(remaining) == 2 and all(kept.id in key for key in remaining)  # its record and its content
