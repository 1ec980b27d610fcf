import uuid

import pytest

from poolq.storage import LocalObjectStore, S3ObjectStore, make_s3_client


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.integration)])
def object_store(request, tmp_path):
    """The reuse store's contract runs on both object stores; S3 is a real SeaweedFS server."""
    if request.param == "local":
        return LocalObjectStore(tmp_path / "store")
    seaweed = request.getfixturevalue("seaweed")
    bucket = f"reuse-{uuid.uuid4().hex[:12]}"
    client = make_s3_client(seaweed.s3_config)
    client.create_bucket(Bucket=bucket)
    return S3ObjectStore(client, bucket)
