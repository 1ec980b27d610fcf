"""A finished job's parts read straight from the S3 server with the tools users load vectors
with: DuckDB (httpfs, ``s3_endpoint`` at the local server) and ``pyarrow.dataset`` over
``pyarrow.fs.S3FileSystem``; rows, vectors and carried fields come back."""
import json
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest
from support.dev_stack import dev_stack

from poolq.api.client.poolq_client import PoolqClient

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def finished(tmp_path_factory, sample_documents):
    """The stack, and an embed job of 10 documents (3 parts) carrying their titles."""
    documents = [{"id": d["id"], "text": d["text"], "fields": {"title": d.get("title") or d["id"], "rank": i}}
                 for i, d in enumerate(sample_documents[:10])]
    with dev_stack(tmp_path_factory.mktemp("stack"), env={"POOLQ_SHARD_MAX_DOCUMENTS": "4"}) as stack:
        with PoolqClient(stack["api_url"], stack["api_key"]) as client:
            job = client.submit({"input": {"documents": documents}, "long_documents": {"mode": "truncate"},
                                 "output": {"include_fields": ["title", "rank"]}})
            assert client.wait(job["id"], poll_interval=0.2, timeout=600)["status"] == "succeeded"
            manifest = client.results(job["id"])["manifest"]
        yield stack, manifest, documents


def _endpoint(stack) -> str:
    return stack["s3_endpoint"].split("://", 1)[1]


def test_duckdb_reads_the_parts_over_s3(finished):
    import duckdb
    import duckdb_extension_httpfs

    stack, manifest, documents = finished
    con = duckdb.connect()
    extension = next(Path(duckdb_extension_httpfs.__file__).parent.glob("extensions/*/httpfs.duckdb_extension"))
    con.load_extension(str(extension))
    con.execute(f"SET s3_endpoint='{_endpoint(stack)}'; SET s3_use_ssl=false; SET s3_url_style='path'; "
                f"SET s3_region='us-east-1'; SET s3_access_key_id='{stack['access_key_id']}'; "
                f"SET s3_secret_access_key='{stack['secret_access_key']}'")
    uris = [part["uri"] for part in manifest["parts"]]
    rows = con.execute(f"SELECT id, embedding, title, rank FROM read_parquet({json.dumps(uris)}) ORDER BY rank").fetchall()
    assert [row[0] for row in rows] == [d["id"] for d in documents]
    assert [row[2] for row in rows] == [d["fields"]["title"] for d in documents]
    vectors = np.array([row[1] for row in rows], dtype=np.float32)
    assert vectors.shape == (10, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)


def test_pyarrow_dataset_reads_the_parts_over_s3(finished):
    from pyarrow import fs

    stack, manifest, documents = finished
    s3 = fs.S3FileSystem(access_key=stack["access_key_id"], secret_key=stack["secret_access_key"], scheme="http",
                         endpoint_override=_endpoint(stack), region="us-east-1")
    paths = [part["uri"].removeprefix("s3://") for part in manifest["parts"]]
    table = ds.dataset(paths, filesystem=s3, format="parquet").to_table().sort_by("rank")
    assert table.column("id").to_pylist() == [d["id"] for d in documents]
    assert table.column("title").to_pylist() == [d["fields"]["title"] for d in documents]
    assert table.schema.field("embedding").type.list_size == 384
