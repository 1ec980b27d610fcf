"""Every supported input format through the documented upload path on `poolq dev up`: a Parquet
file through ``POST /v1/uploads`` + PUT, through ``poolq submit FILE.parquet`` and through the
Python client; JSONL and ``.jsonl.gz`` the same way. The key keeps the file's ending, the readers
look at the bytes first, and a name that says Parquet over bytes that are not is one clear error."""
import gzip
import io
import json

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from support.dev_stack import dev_stack

from poolq.api.cli.main import main
from poolq.api.client.poolq_client import PoolqClient

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with dev_stack(tmp_path_factory.mktemp("uploads-stack")) as info:
        yield info


@pytest.fixture
def client(stack):
    with PoolqClient(stack["api_url"], stack["api_key"]) as poolq:
        yield poolq


def _rows(sample_documents, count: int, start: int = 0) -> list[dict]:
    return [{"doc_id": f"doc-{i}", "body": d["text"][:300]} for i, d in enumerate(sample_documents[start:start + count])]


def _parquet(rows: list[dict]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink, row_group_size=3)
    return sink.getvalue()


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _run(client: PoolqClient, uri: str) -> dict:
    job = client.submit({"input": {"uri": uri, "id_field": "doc_id", "text_field": "body"},
                         "long_documents": {"mode": "truncate"}})
    return client.wait(job["id"], poll_interval=0.2, timeout=600)


def _result_ids(client: PoolqClient, job_id: str) -> list[str]:
    return sorted(client.read_table(job_id).column("id").to_pylist())


def test_a_parquet_file_through_post_uploads_and_a_put(stack, client, sample_documents):
    # Given a ticket asked for a file named corpus.parquet, and the Parquet file PUT to its URL
    auth = {"Authorization": f"Bearer {stack['api_key']}"}
    answer = httpx.post(f"{stack['api_url']}/v1/uploads", headers=auth, json={"filename": "corpus.parquet"}, timeout=30)
    assert answer.status_code == 201, answer.text
    upload = answer.json()
    assert upload["uri"].endswith(".parquet"), upload  # the key keeps the file's ending
    rows = _rows(sample_documents, 7)
    httpx.put(upload["url"], content=_parquet(rows), timeout=30).raise_for_status()
    # When a job reads it by its columns, Then every row is embedded
    job = _run(client, upload["uri"])
    assert job["status"] == "succeeded" and job["counts"]["completed"] == 7, job
    assert _result_ids(client, job["id"]) == sorted(row["doc_id"] for row in rows)


def test_poolq_submit_a_parquet_file(stack, sample_documents, tmp_path):
    rows = _rows(sample_documents, 5, start=10)
    source = tmp_path / "corpus.parquet"
    source.write_bytes(_parquet(rows))
    env = {"POOLQ_API_URL": stack["api_url"], "POOLQ_API_KEY": stack["api_key"]}
    result = CliRunner().invoke(main, ["submit", str(source), "--id-field", "doc_id", "--text-field", "body",
                                       "--long-documents", '{"mode": "truncate"}', "--wait", "--poll-interval", "0.2"],
                                env=env)
    assert result.exit_code == 0, result.output
    assert ".parquet" in result.output and "succeeded: 5/5 documents, 0 failed" in result.output, result.output


@pytest.mark.parametrize("name, encode, ending", [
    ("corpus.jsonl", _jsonl, ".jsonl"),
    ("corpus.jsonl.gz", lambda rows: gzip.compress(_jsonl(rows)), ".jsonl.gz"),
    ("export.bin", _parquet, ".parquet"),  # no telling name: the bytes say Parquet
])
def test_the_clients_upload_keeps_the_format(client, sample_documents, tmp_path, name, encode, ending):
    rows = _rows(sample_documents, 4, start=20)
    source = tmp_path / name
    source.write_bytes(encode(rows))
    uri = client.upload(source)
    assert uri.endswith(ending), uri
    job = _run(client, uri)
    assert job["status"] == "succeeded" and _result_ids(client, job["id"]) == sorted(r["doc_id"] for r in rows), job


def test_parquet_bytes_under_a_jsonl_key_are_read_as_parquet(stack, client, sample_documents):
    # An older client's ticket (no body: a .jsonl key) holding a Parquet file: the magic bytes decide
    auth = {"Authorization": f"Bearer {stack['api_key']}"}
    upload = httpx.post(f"{stack['api_url']}/v1/uploads", headers=auth, timeout=30).json()
    assert upload["uri"].endswith(".jsonl"), upload
    httpx.put(upload["url"], content=_parquet(_rows(sample_documents, 3)), timeout=30).raise_for_status()
    job = _run(client, upload["uri"])
    assert job["status"] == "succeeded" and job["counts"]["completed"] == 3, job


def test_a_name_that_says_parquet_over_jsonl_bytes_is_one_error_naming_the_object(stack, client, sample_documents):
    auth = {"Authorization": f"Bearer {stack['api_key']}"}
    upload = httpx.post(f"{stack['api_url']}/v1/uploads", headers=auth, json={"format": "parquet"}, timeout=30).json()
    httpx.put(upload["url"], content=_jsonl(_rows(sample_documents, 3)), timeout=30).raise_for_status()
    job = _run(client, upload["uri"])
    assert job["status"] == "failed" and job["counts"]["failed"] == 0, job  # one error, not one per line
    assert f"{upload['uri']} is named as Parquet but is not" in job["error"], job["error"]
    assert "it looks like JSON lines: name it .jsonl" in job["error"], job["error"]


def test_the_cli_refuses_a_parquet_name_over_other_bytes_before_uploading(stack, sample_documents, tmp_path):
    source = tmp_path / "corpus.parquet"
    source.write_bytes(_jsonl(_rows(sample_documents, 2)))
    env = {"POOLQ_API_URL": stack["api_url"], "POOLQ_API_KEY": stack["api_key"]}
    result = CliRunner().invoke(main, ["submit", str(source), "--id-field", "doc_id", "--text-field", "body"], env=env)
    assert result.exit_code == 2 and "corpus.parquet is named as Parquet but is not" in result.output, result.output
    assert "uploaded" not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("body, says", [
    ({"filename": "corpus.csv"}, "has none of the input endings .jsonl, .jsonl.gz, .parquet"),
    ({"filename": "corpus.parquet", "format": "jsonl"}, "filename 'corpus.parquet' says .parquet, format says jsonl"),
    ({"format": "csv"}, "jsonl"),
])
def test_an_upload_of_an_unknown_format_is_a_422_saying_what_is_accepted(stack, body, says):
    auth = {"Authorization": f"Bearer {stack['api_key']}"}
    answer = httpx.post(f"{stack['api_url']}/v1/uploads", headers=auth, json=body, timeout=30)
    assert answer.status_code == 422 and says in answer.text, answer.text
