import pytest
from support.object_stores import BOTH_STORES, object_store_for


@pytest.fixture(params=BOTH_STORES)
def store(request, tmp_path):
    """Each contract test runs on both implementations; S3 is a real SeaweedFS server."""
    return object_store_for(request, tmp_path, "contract")
