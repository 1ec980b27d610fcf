"""A Parquet prefix input end to end: three Parquet objects in SeaweedFS (integer ids, a null text,
a text column of numbers, carried columns of several Arrow types, one of them missing from one
object), a job over HTTP on `poolq dev up`, and its output read back row by row: ids as text,
vectors equal to sentence-transformers', carried columns with their Arrow types, and an error
file naming each bad row's object and row number."""
import datetime
import io
import json

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.dev_stack import dev_stack

from poolq.api.client.poolq_client import PoolqClient
from poolq.storage import S3Config, make_s3_client

pytestmark = pytest.mark.integration

UTC = datetime.timezone.utc
TYPES = {"title": pa.string(), "year": pa.int32(), "published": pa.timestamp("ms", tz="UTC"), "tags": pa.list_(pa.string())}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with dev_stack(tmp_path_factory.mktemp("stack"), env={"POOLQ_SHARD_MAX_DOCUMENTS": "3"}) as info:
        yield info


def _sentences(sample_documents, count):
    texts = [s for d in sample_documents for s in d["text"].split(". ") if 30 < len(s) < 300]
    return texts[:count]


def _objects(sample_documents) -> dict[str, pa.Table]:
    """part-000: 6 rows in row groups of 4, row 3's text null; part-001: no ``tags`` column, its
    row 2 repeats id 101; part-002: its ``text`` column holds integers (every row an error)."""
    texts = _sentences(sample_documents, 11)
    day = datetime.datetime(2024, 3, 1, 9, 30, tzinfo=UTC)
    first = pa.table({
        "doc_id": pa.array(range(100, 106), pa.int64()),
        "body": [texts[0], texts[1], None, texts[2], texts[3], texts[4]],
        "title": [f"title {i}" for i in range(6)],
        "year": pa.array([1990 + i for i in range(6)], pa.int32()),
        "published": pa.array([day + datetime.timedelta(days=i) for i in range(6)], TYPES["published"]),
        "tags": pa.array([["a"], [], ["b", "c"], None, ["d"], ["e", "f", "g"]], TYPES["tags"]),
    })
    second = pa.table({
        "doc_id": pa.array([200, 101, 201, 202, 203], pa.int64()),
        "body": texts[5:10],
        "title": ["second 0", None, "second 2", "second 3", "second 4"],
        "year": pa.array([2000, 2001, None, 2003, 2004], pa.int32()),
        "published": pa.array([day] * 5, TYPES["published"]),
    })
    third = pa.table({"doc_id": pa.array([300, 301], pa.int64()), "body": pa.array([7, 8], pa.int64()),
                      "title": ["third 0", "third 1"]})
    return {"part-000.parquet": (first, 4), "part-001.parquet": (second, 5), "part-002.parquet": (third, 2)}


def _put_prefix(stack, s3, objects) -> str:
    """The objects under a prefix of the tenant's uploads area (where its inputs may be)."""
    auth = {"Authorization": f"Bearer {stack['api_key']}"}
    upload = httpx.post(f"{stack['api_url']}/v1/uploads", headers=auth, timeout=30).json()
    prefix_uri = upload["uri"].rsplit("/", 1)[0] + "/parquet-e2e/"
    prefix_key = prefix_uri.removeprefix(f"s3://{stack['bucket']}/")
    for name, (table, row_group_size) in objects.items():
        sink = io.BytesIO()
        pq.write_table(table, sink, row_group_size=row_group_size)
        s3.put_object(Bucket=stack["bucket"], Key=prefix_key + name, Body=sink.getvalue())
    return prefix_uri


def _expected(objects):
    """One pass over the rows: what each kept id's row holds, and each bad row's (object, row, code)."""
    kept, errors, seen = {}, [], set()
    for name, (table, _) in objects.items():
        for number, row in enumerate(table.to_pylist(), start=1):
            record_id, text = str(row["doc_id"]), row["body"]
            if text is None or not isinstance(text, str):
                errors.append((name, number, "missing_text" if text is None else "invalid_text", record_id))
            elif record_id in seen:
                errors.append((name, number, "duplicate_id", record_id))
            else:
                seen.add(record_id)
                kept[record_id] = {"text": text, **{field: row.get(field) for field in TYPES}}
    return kept, errors


def test_a_parquet_prefix_job_row_by_row(stack, sample_documents, st_minilm):
    s3 = make_s3_client(S3Config(stack["s3_endpoint"], stack["access_key_id"], stack["secret_access_key"]))
    objects = _objects(sample_documents)
    prefix = _put_prefix(stack, s3, objects)
    spec = {"input": {"uri": prefix, "id_field": "doc_id", "text_field": "body"},
            "output": {"include_fields": list(TYPES)}}
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        job = client.submit(spec)
        final = client.wait(job["id"], poll_interval=0.2, timeout=600)
        manifest = client.results(job["id"])
    kept, expected_errors = _expected(objects)
    # Then every row is in one part or in the error file, exactly once
    assert final["status"] == "partially_succeeded", final
    assert final["counts"] == {"total": 13, "completed": len(kept), "failed": len(expected_errors), "not_processed": 0} == {
        "total": 13, "completed": 9, "failed": 4, "not_processed": 0}
    table = pa.concat_tables([pq.read_table(io.BytesIO(s3.get_object(Bucket=stack["bucket"], Key=part["key"])["Body"].read()))
                              for part in manifest["parts"]])
    rows = table.to_pylist()
    assert sorted(row["id"] for row in rows) == sorted(kept) and len(manifest["parts"]) == 4  # 3 rows a shard, per object
    # ids are text; the carried columns keep their Arrow types; a column part-001 lacks is null there
    assert table.schema.field("id").type == pa.string()
    assert {name: table.schema.field(name).type for name in TYPES} == TYPES
    assert {c["name"]: c["type"] for c in manifest["output"]["schema"] if c["name"] in TYPES} == {
        "title": "string", "year": "int32", "published": "timestamp[ms, tz=UTC]", "tags": "list<string>"}
    for row in rows:
        want = kept[row["id"]]
        assert {field: row[field] for field in TYPES} == {field: want[field] for field in TYPES}, row["id"]
    assert [row["tags"] for row in rows if row["id"].startswith("2")] == [None] * 4
    # and each vector is sentence-transformers' for the row's text
    vectors = np.stack([row["embedding"] for row in rows])
    reference = st_minilm.encode([kept[row["id"]]["text"] for row in rows])
    cosines = (vectors * reference).sum(1) / np.linalg.norm(reference, axis=1) / np.linalg.norm(vectors, axis=1)
    assert cosines.min() >= 0.99999
    # The error file names each bad row's object and row number
    body = s3.get_object(Bucket=stack["bucket"], Key=manifest["errors"]["key"])["Body"].read().decode()
    errors = [json.loads(line) for line in body.splitlines()]
    assert [(e["source"].rsplit("/", 1)[-1], e["line"], e["code"], e["id"]) for e in errors] == expected_errors
    sources = {name: prefix + name for name in objects}
    assert errors[0]["message"] == f"{sources['part-000.parquet']}: row 3 (id '102'): field 'body' is null"
    assert errors[1]["message"].startswith(f"{sources['part-001.parquet']}: row 2 (id '101'): this id appeared before, "
                                           f"at {sources['part-000.parquet']}: row 2")
    assert errors[2]["message"] == f"{sources['part-002.parquet']}: row 1 (id '300'): field 'body' must be a string"
