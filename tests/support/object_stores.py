"""An object store of either implementation, for contract tests that run over both: the local one,
or a fresh bucket on the session's real SeaweedFS server (the ``seaweed`` fixture)."""
from __future__ import annotations

import uuid

import pytest

from poolq.storage import LocalObjectStore, ObjectStore, S3ObjectStore, make_s3_client

BOTH_STORES = ["local", pytest.param("s3", marks=pytest.mark.integration)]


def object_store_for(request: pytest.FixtureRequest, tmp_path, bucket_prefix: str) -> ObjectStore:
    """``request.param``'s store: under ``tmp_path``, or a new bucket named ``<bucket_prefix>-<random>``."""
    if request.param == "local":
        return LocalObjectStore(tmp_path / "store")
    seaweed = request.getfixturevalue("seaweed")
    bucket = f"{bucket_prefix}-{uuid.uuid4().hex[:12]}"
    client = make_s3_client(seaweed.s3_config)
    client.create_bucket(Bucket=bucket)
    return S3ObjectStore(client, bucket)
