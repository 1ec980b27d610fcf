"""Content-addressed reuse on a real `poolq dev up` stack (Redis, SeaweedFS, API, Celery workers):
jobs over HTTP, rows read back from the bucket, counts from the workers' own commits. A repeated
text is computed once across shards; a tenant's second job computes nothing; another tenant reuses
nothing; late chunks are reused only with their whole document; `poolq cache` sees and clears it."""
import io
import os
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from support.dev_stack import dev_stack

from poolq.api.client.poolq_client import PoolqClient
from poolq.storage import S3Config, make_s3_client

pytestmark = pytest.mark.integration

# Shards of 4 documents: a job of 24 has 6, so repeats land in other shards than their first copy.
STACK_ENV = {"POOLQ_SHARD_MAX_DOCUMENTS": "4", "POOLQ_COMPUTE_DTYPE": "float32"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with dev_stack(tmp_path_factory.mktemp("reuse"), env=STACK_ENV) as info:
        yield info


def _cli_env(stack) -> dict:
    env = {name: value for name, value in os.environ.items() if not name.startswith("POOLQ_")}
    env["POOLQ_DEV_DIR"] = stack["dir"]
    return env


def _poolq(stack, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "poolq.api", *args], env=_cli_env(stack), capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def tenant_keys(stack) -> dict[str, str]:
    keys = {}
    for tenant in ("acme", "globex"):
        created = _poolq(stack, "keys", "create", "--tenant", tenant)
        assert created.returncode == 0, created.stderr
        keys[tenant] = created.stdout.strip().splitlines()[-1]
    return keys


@pytest.fixture(scope="module")
def sentences(sample_documents):
    found = [s.strip() for d in sample_documents for s in re.split(r"(?<=[.!?])\s+", d["text"])]
    return [s for s in found if 40 <= len(s) <= 300]


def _run(stack, key: str, spec: dict) -> tuple[dict, dict, dict[str, list[dict]]]:
    """Submit, wait; the final status, the manifest and each id's rows (chunk rows in order)."""
    s3 = make_s3_client(S3Config(stack["s3_endpoint"], stack["access_key_id"], stack["secret_access_key"]))
    with PoolqClient(stack["api_url"], key) as client:
        job = client.submit(spec)
        final = client.wait(job["id"], poll_interval=0.2, timeout=600)
        manifest = client.results(job["id"])["manifest"]
    assert final["status"] == "succeeded", final
    rows: dict[str, list[dict]] = {}
    for part in manifest["parts"]:
        for row in pq.read_table(io.BytesIO(s3.get_object(Bucket=stack["bucket"], Key=part["key"])["Body"].read())).to_pylist():
            rows.setdefault(row["id"], []).append(row)
    return final, manifest, {name: sorted(found, key=lambda row: row.get("chunk_index") or 0) for name, found in rows.items()}


def _inline(docs: list[dict], **options) -> dict:
    return {"input": {"documents": docs}, **options}


def test_half_duplicates_are_computed_once_and_every_row_equals_a_fresh_one(stack, tenant_keys, sentences):
    distinct = sentences[:12]
    docs = [{"id": f"a{i:02d}", "text": t} for i, t in enumerate(distinct)] + \
           [{"id": f"b{i:02d}", "text": t} for i, t in enumerate(reversed(distinct))]
    status, manifest, rows = _run(stack, tenant_keys["acme"], _inline(docs))
    _, fresh_manifest, fresh = _run(stack, tenant_keys["acme"], _inline(docs[:12]))
    assert manifest["shards"]["total"] == 6 and manifest["counts"]["completed"] == 24
    # The workers computed exactly the 12 distinct texts' tokens: what a job of those 12 alone computed
    assert manifest["reuse"] == {"reused_documents": 12, "reused_tokens": fresh_manifest["usage"]["tokens"],
                                 "computed_tokens": fresh_manifest["usage"]["tokens"]}
    assert manifest["usage"]["tokens"] == fresh_manifest["usage"]["tokens"] and status["reuse"] == manifest["reuse"]
    by_text = {doc["text"]: fresh[doc["id"]][0] for doc in docs[:12]}
    for doc in docs:
        row, expected = rows[doc["id"]][0], by_text[doc["text"]]
        assert row["embedding"] == expected["embedding"]  # bit-identical: copied, or computed alike
        assert row["content_hash"] == expected["content_hash"] and row["num_tokens"] == expected["num_tokens"]


def test_a_tenants_second_job_computes_nothing_and_another_tenant_reuses_nothing(stack, tenant_keys, sentences):
    docs = [{"id": f"t{i:02d}", "text": t} for i, t in enumerate(sentences[20:36])]
    _, first, first_rows = _run(stack, tenant_keys["acme"], _inline(docs, reuse="tenant"))
    assert first["reuse"]["reused_documents"] == 0 and first["reuse"]["computed_tokens"] > 0
    _, second, second_rows = _run(stack, tenant_keys["acme"], _inline(docs, reuse="tenant"))
    assert second["reuse"] == {"reused_documents": 16, "reused_tokens": first["reuse"]["computed_tokens"],
                               "computed_tokens": 0}
    assert second_rows == first_rows
    _, other, other_rows = _run(stack, tenant_keys["globex"], _inline(docs, reuse="tenant"))
    assert other["reuse"]["reused_documents"] == 0
    assert other["reuse"]["computed_tokens"] == first["reuse"]["computed_tokens"]
    assert [row[0]["embedding"] for row in other_rows.values()] == [row[0]["embedding"] for row in first_rows.values()]


def test_late_chunks_are_reused_only_with_their_whole_document(stack, tenant_keys, sentences):
    shared = " ".join(sentences[40:44])  # the same opening paragraph ...
    endings = [" ".join(sentences[50 + 4 * i:54 + 4 * i]) for i in range(3)]  # ... in three different documents
    docs = [{"id": f"late{i}", "text": shared + " " + ending} for i, ending in enumerate(endings)]
    docs.append({"id": "late0-again", "text": docs[0]["text"]})  # and one exact repeat
    options = {"long_documents": {"mode": "late_chunks", "chunk_tokens": 32}, "reuse": "tenant"}
    _, manifest, rows = _run(stack, tenant_keys["globex"], _inline(docs, **options))
    assert manifest["reuse"]["reused_documents"] == 1  # only the exact repeat
    assert rows["late0-again"] == [{**row, "id": "late0-again"} for row in rows["late0"]]
    # The shared paragraph's first chunk differs by context: each document's own, none copied across
    first_chunks = [rows[f"late{i}"][0]["embedding"] for i in range(3)]
    assert first_chunks[0] != first_chunks[1] != first_chunks[2] != first_chunks[0]
    # A later job of the same tenant copies whole documents, chunk rows and all, only for an identical text
    edited = [docs[0], {"id": "late1-edited", "text": docs[1]["text"] + " The end."}]
    _, again, again_rows = _run(stack, tenant_keys["globex"], _inline(edited, **options))
    assert again["reuse"]["reused_documents"] == 1
    assert again_rows["late0"] == rows["late0"]
    assert again_rows["late1-edited"][0]["embedding"] != rows["late1"][0]["embedding"]


def test_poolq_cache_stats_and_clear_one_tenant(stack, tenant_keys, sentences):
    docs = [{"id": f"c{i:02d}", "text": t} for i, t in enumerate(sentences[60:68])]
    _run(stack, tenant_keys["acme"], _inline(docs, reuse="tenant"))
    before = _poolq(stack, "cache", "stats", "--tenant", "acme", "--json")
    assert before.returncode == 0, before.stderr
    assert '"documents": 0' not in before.stdout and '"tenant": "acme"' in before.stdout
    cleared = _poolq(stack, "cache", "clear", "--tenant", "acme", "--yes")
    assert cleared.returncode == 0 and "objects deleted" in cleared.stdout, cleared.stderr
    after = _poolq(stack, "cache", "stats", "--tenant", "acme", "--json")
    assert '"documents": 0' in after.stdout and '"objects": 0' in after.stdout
    globex = _poolq(stack, "cache", "stats", "--tenant", "globex", "--json")
    assert '"documents": 0' not in globex.stdout  # the other tenant's store is untouched
    _, recomputed, _ = _run(stack, tenant_keys["acme"], _inline(docs, reuse="tenant"))
    assert recomputed["reuse"]["reused_documents"] == 0
    bad = _poolq(stack, "cache", "stats", "--tenant", "Not A Tenant")
    assert bad.returncode == 2 and "--tenant" in bad.stderr
