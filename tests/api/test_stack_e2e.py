"""End to end with real processes: `poolq dev up` (Redis, SeaweedFS, uvicorn, a Celery worker),
jobs submitted over HTTP, Parquet read back from SeaweedFS with boto3."""
import io
import json

import httpx
import numpy as np
import pyarrow.parquet as pq
import pytest
from support.dev_stack import dev_stack, poolq

from poolq.api.client.poolq_client import PoolqClient, PoolqError
from poolq.storage import S3Config, make_s3_client

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with dev_stack(tmp_path_factory.mktemp("stack"), env={"POOLQ_SHARD_MAX_DOCUMENTS": "8"}) as info:
        yield info


@pytest.fixture(scope="module")
def s3(stack):
    return make_s3_client(S3Config(stack["s3_endpoint"], stack["access_key_id"], stack["secret_access_key"]))


def _read_outputs(s3, bucket: str, manifest: dict):
    ids, vectors = [], []
    for part in manifest["parts"]:
        table = pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=part["key"])["Body"].read()))
        ids += table.column("id").to_pylist()
        vectors += list(table.column("embedding").to_numpy(zero_copy_only=False))
    body = s3.get_object(Bucket=bucket, Key=manifest["errors"]["key"])["Body"].read().decode()
    errors = [json.loads(line) for line in body.splitlines()]
    return ids, np.stack(vectors) if vectors else None, errors


def test_status_json_names_endpoints_credentials_and_pids(stack):
    for key in ("api_url", "s3_endpoint", "bucket", "redis_url", "access_key_id", "secret_access_key", "pids"):
        assert stack[key], key
    assert set(stack["pids"]) == {"redis", "seaweed", "api", "worker", "beat"} and all(stack["alive"].values())


def test_up_again_is_idempotent(stack):
    again = poolq("dev", "up", "--dir", stack["dir"])
    assert again.returncode == 0 and "already running" in again.stdout
    assert json.loads(poolq("dev", "status", "--dir", stack["dir"], "--json").stdout)["pids"] == stack["pids"]


def test_inline_job_matches_sentence_transformers(stack, s3, sample_documents, st_minilm):
    # Given the real sample corpus, sent inline over HTTP
    docs = [{"id": d["id"], "text": d["text"]} for d in sample_documents]
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        job = client.submit({"input": {"documents": docs}, "long_documents": {"mode": "truncate"}})
        seen = []
        final = client.wait(job["id"], poll_interval=0.2, timeout=600, on_progress=lambda j: seen.append(j["status"]))
        manifest = client.results(job["id"])
    # Then it succeeds, in several parts, and the stored vectors equal sentence-transformers'
    assert final["status"] == "succeeded", final
    assert final["counts"] == {"total": len(docs), "completed": len(docs), "failed": 0, "not_processed": 0}
    assert len(manifest["parts"]) == -(-len(docs) // 8)
    ids, vectors, errors = _read_outputs(s3, stack["bucket"], manifest)
    assert sorted(ids) == sorted(d["id"] for d in docs) and errors == []
    by_id = {d["id"]: d["text"] for d in docs}
    reference = st_minilm.encode([by_id[i] for i in ids])
    cosines = (vectors * reference).sum(1) / np.linalg.norm(reference, axis=1) / np.linalg.norm(vectors, axis=1)
    assert cosines.min() >= 0.99999
    assert final["usage"]["tokens"] > 0 and final["result"]["manifest_uri"].startswith(f"s3://{stack['bucket']}/")


def test_s3_job_with_bad_records_partially_succeeds(stack, s3, sample_documents):
    # Given a JSONL object in the bucket with custom fields and bad records among good ones
    good = [{"doc_id": d["id"], "body": d["text"]} for d in sample_documents[:12]]
    lines = [json.dumps(r).encode() for r in good[:5]]
    lines += [b'{"doc_id": "blank", "body": ""}', b'{"body": "no id here"}', b'\xff\xfe not utf-8']
    lines += [json.dumps(r).encode() for r in good[5:]]
    # uploaded through a presigned PUT (POST /v1/uploads), the way large inputs reach the server
    auth = {"Authorization": f"Bearer {stack['api_key']}"}
    upload = httpx.post(f"{stack['api_url']}/v1/uploads", headers=auth, timeout=30).json()
    assert upload["uri"].startswith(f"s3://{stack['bucket']}/jobs/tenants/dev/uploads/"), upload
    httpx.put(upload["url"], content=b"\n".join(lines) + b"\n", timeout=30).raise_for_status()
    spec = {"input": {"uri": upload["uri"], "id_field": "doc_id", "text_field": "body"},
            "long_documents": {"mode": "truncate"}}
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        job = client.submit(spec)
        final = client.wait(job["id"], poll_interval=0.2, timeout=600)
        manifest = client.results(job["id"])
    # Then the bad records are in the error file, every good one is in a part, each exactly once
    assert final["status"] == "partially_succeeded", final
    ids, _, errors = _read_outputs(s3, stack["bucket"], manifest)
    assert sorted(ids) == sorted(r["doc_id"] for r in good) and len(ids) == len(set(ids))
    assert [(e["line"], e["code"], e["id"]) for e in errors] == [
        (6, "empty_text", "blank"), (7, "missing_id", None), (8, "invalid_utf8", None),
    ]
    assert final["counts"] == {"total": 15, "completed": 12, "failed": 3, "not_processed": 0}


def test_unknown_job_404_and_bad_body_422_over_http(stack):
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        with pytest.raises(PoolqError) as missing:
            client.get("0" * 32)
        assert missing.value.status_code == 404
        with pytest.raises(PoolqError) as invalid:
            client.submit({"input": {"uri": "s3://other-bucket/../x.jsonl"}})
        assert invalid.value.status_code == 422 and "input" in json.dumps(invalid.value.detail)


def test_a_taken_port_fails_with_a_clear_message(stack, tmp_path):
    result = poolq("dev", "up", "--dir", str(tmp_path / "other"), "--api-port", str(stack["ports"]["api"]),
                   "--redis-port", "0", "--s3-port", "0")
    assert result.returncode == 2
    assert f"port {stack['ports']['api']} on 127.0.0.1 is already in use" in result.stderr


def test_a_missing_binary_fails_with_a_clear_message(tmp_path):
    result = poolq("dev", "up", "--dir", str(tmp_path / "nobin"), "--redis-port", "0", "--s3-port", "0", "--api-port", "0",
                   env={"POOLQ_REDIS_SERVER": str(tmp_path / "no-such-redis-server")})
    assert result.returncode == 2 and "no-such-redis-server" in result.stderr


@pytest.mark.parametrize(
    "long_documents_option, rows_per_doc",
    [
        ({"mode": "error"}, None),
        ({"mode": "truncate"}, 1),
        ({"mode": "chunked", "max_embed_len": 20000}, 1),
        ({"mode": "naive_chunks", "chunk_tokens": 200}, "many"),
        ({"mode": "late_chunks", "chunk_by": "sentences", "chunk_sentences": 8}, "many"),
    ],
)
def test_every_long_document_mode_over_http(stack, s3, long_documents, sample_documents, long_documents_option, rows_per_doc):
    # Given real long articles (thousands of tokens) and one short document
    docs = [{"id": d["id"], "text": d["text"]} for d in long_documents]
    docs += [{"id": "short", "text": sample_documents[0]["text"][:300]}]
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        job = client.submit({"input": {"documents": docs}, "long_documents": long_documents_option})
        final = client.wait(job["id"], poll_interval=0.2, timeout=600)
        manifest = client.results(job["id"])
    ids, vectors, errors = _read_outputs(s3, stack["bucket"], manifest)
    long_ids = {d["id"] for d in long_documents}
    if rows_per_doc is None:  # error mode: every long article is a per-record error naming its size
        assert final["status"] == "partially_succeeded" and ids == ["short"]
        assert {e["id"] for e in errors} == long_ids and all(e["code"] == "document_too_long" for e in errors)
        return
    assert final["status"] == "succeeded", final
    assert set(ids) == long_ids | {"short"} and errors == []
    if rows_per_doc == 1:
        assert len(ids) == len(docs)
    else:
        assert all(ids.count(doc_id) > 3 for doc_id in long_ids)
        assert set(manifest_columns(s3, stack["bucket"], manifest)) >= {"chunk_index", "token_start", "char_end"}
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def manifest_columns(s3, bucket, manifest):
    return json.loads(s3.get_object(Bucket=bucket, Key=manifest["manifest_key"])["Body"].read())["columns"]


def test_the_stacks_api_logs_json_lines_and_its_state_file_is_private(stack):
    # Given the stack has answered requests (the module's other tests, and this one)
    httpx.get(f"{stack['api_url']}/healthz", timeout=10).raise_for_status()
    from pathlib import Path

    state_dir = Path(stack["dir"])
    # Then every line of its API log is one JSON object, as README says (POOLQ_LOG_FORMAT=json)
    lines = [line for line in (state_dir / "logs" / "api.log").read_text().splitlines() if line.strip()]
    assert lines and all(isinstance(json.loads(line), dict) for line in lines), lines[:3]
    # And the state file holding the admin key and S3 secret is its owner's alone
    assert (state_dir / "stack.json").stat().st_mode & 0o077 == 0
