import pytest
from support.object_stores import BOTH_STORES, object_store_for


@pytest.fixture(params=BOTH_STORES)
def object_store(request, tmp_path):
    """The reuse store's contract runs on both object stores; S3 is a real SeaweedFS server."""
    return object_store_for(request, tmp_path, "reuse")
