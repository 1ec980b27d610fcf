"""An object store of either implementation, for contract tests that run over both: the local one,
or a fresh bucket on the session's real SeaweedFS server (the ``seaweed`` fixture).

Every bucket a test makes is removed when the test ends (``BucketMaker``): SeaweedFS gives each bucket
a volume of its own, and a session's server has a fixed number of them (``SeaweedConfig.max_volumes``);
buckets left behind used them up after a few dozen tests, and then every write failed."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from poolq.storage import LocalObjectStore, ObjectStore, S3Config, S3ObjectStore, make_s3_client

BOTH_STORES = ["local", pytest.param("s3", marks=pytest.mark.integration)]


class BucketMaker:
    """Makes fresh buckets on one S3 server and removes them all, content included, on ``remove_all``."""

    def __init__(self, config: S3Config) -> None:
        self.config = config
        self._made: list[tuple[object, str]] = []

    def store(self, prefix: str, config: S3Config | None = None) -> S3ObjectStore:
        """An S3ObjectStore on a new bucket ``<prefix>-<random>``, under ``config`` (the server's by default)."""
        config = config or self.config
        client = make_s3_client(config)
        return S3ObjectStore(client, self.bucket(prefix, client), config)

    def bucket(self, prefix: str, client=None) -> str:
        """Create a new bucket named ``<prefix>-<random>`` and return its name."""
        client = client or make_s3_client(self.config)
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        client.create_bucket(Bucket=name)
        self._made.append((client, name))
        return name

    def remove_all(self) -> None:
        for client, name in reversed(self._made):
            remove_bucket(client, name)
        self._made.clear()


def remove_bucket(client, bucket: str) -> None:
    """Abort the bucket's open uploads, delete its objects, then the bucket."""
    for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
        for upload in page.get("Uploads", []):
            client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
    client.delete_bucket(Bucket=bucket)


@contextmanager
def bucket_maker(config: S3Config) -> Iterator[BucketMaker]:
    maker = BucketMaker(config)
    try:
        yield maker
    finally:
        maker.remove_all()


def object_store_for(request: pytest.FixtureRequest, tmp_path, bucket_prefix: str) -> ObjectStore:
    """``request.param``'s store: under ``tmp_path``, or a new bucket named ``<bucket_prefix>-<random>``
    (removed when the test ends)."""
    if request.param == "local":
        return LocalObjectStore(tmp_path / "store")
    return request.getfixturevalue("new_buckets").store(bucket_prefix)


class RangeCountingStore(LocalObjectStore):
    """A local store that notes every ranged read (what a reader fetches of an object)."""

    def __init__(self, root) -> None:
        super().__init__(root)
        self.reads: list[tuple[int, int]] = []

    def open_range(self, key, start, end):
        self.reads.append((start, end))
        return super().open_range(key, start, end)
