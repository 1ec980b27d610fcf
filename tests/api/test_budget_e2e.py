"""Token budgets on a real `poolq dev up` stack (Redis, SeaweedFS, API, Celery workers), over HTTP:
a job over its ``limits.max_tokens`` is refused at submit (422, counted exactly); one that passes
it while running stops with every record accounted for once (a row, a ``budget_exceeded`` line, or
a shard never started); reused tokens are free; a tenant past its daily tokens gets 429 with
``Retry-After`` until midnight UTC. Each test is its own tenant: the daily ceiling is per tenant."""
import io
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pyarrow.parquet as pq
import pytest
from support.dev_stack import dev_stack

from poolq.api.client.poolq_client import PoolqClient, PoolqError
from poolq.storage import S3Config, make_s3_client

pytestmark = pytest.mark.integration

DAILY = 3000
# Shards of 3 documents, steps of 128 tokens looked at every 10 ms: a running job stops within a step.
STACK_ENV = {"POOLQ_SHARD_MAX_DOCUMENTS": "3", "POOLQ_COMPUTE_DTYPE": "float32", "POOLQ_MAX_NUM_BATCHED_TOKENS": "128",
             "POOLQ_CANCEL_CHECK_INTERVAL_S": "0.01", "POOLQ_TENANT_MAX_TOKENS_PER_DAY": str(DAILY),
             # An input priced from a sample (one document per length bucket) is refused only 95 % over its
             # limit: the job that passes its limit gets through submit, and the run stops it.
             "POOLQ_ESTIMATE_SAMPLE_PER_STRATUM": "1", "POOLQ_BUDGET_ESTIMATE_MARGIN": "0.95"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with dev_stack(tmp_path_factory.mktemp("budget"), env=STACK_ENV) as info:
        yield info


def _key(stack, tenant: str) -> str:
    env = {name: value for name, value in os.environ.items() if not name.startswith("POOLQ_")}
    env["POOLQ_DEV_DIR"] = stack["dir"]
    created = subprocess.run([sys.executable, "-m", "poolq.api", "keys", "create", "--tenant", tenant], env=env,
                             capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    return created.stdout.strip().splitlines()[-1]


def _run(stack, key: str, spec: dict) -> tuple[dict, dict]:
    with PoolqClient(stack["api_url"], key) as client:
        job = client.submit(spec)
        final = client.wait(job["id"], poll_interval=0.2, timeout=600)
        return final, client.results(job["id"])["manifest"]


def _read(stack, key: str) -> bytes:
    s3 = make_s3_client(S3Config(stack["s3_endpoint"], stack["access_key_id"], stack["secret_access_key"]))
    return s3.get_object(Bucket=stack["bucket"], Key=key)["Body"].read()


def _texts(sample_documents, count: int, chars: int, first: int = 0) -> list[dict]:
    return [{"id": f"d{i:02d}", "text": d["text"][:chars]} for i, d in enumerate(sample_documents[first:first + count])]


def test_a_job_over_its_budget_is_refused_at_submit(stack, sample_documents):
    key = _key(stack, "refused")
    spec = {"input": {"documents": _texts(sample_documents, 1, 600)}}
    _, whole = _run(stack, key, spec)
    used = whole["usage"]["tokens"]
    with PoolqClient(stack["api_url"], key) as client, pytest.raises(PoolqError) as refused:
        client.submit({**spec, "limits": {"max_tokens": used - 1}})
    assert refused.value.status_code == 422 and "counted exactly" in str(refused.value.detail)
    assert refused.value.detail[0]["loc"] == ["body", "limits", "max_tokens"]
    final, fits = _run(stack, key, {**spec, "limits": {"max_tokens": used}})
    assert final["status"] == "succeeded" and fits["usage"]["tokens"] == used


def test_a_running_job_stops_at_its_budget_with_every_record_accounted_for_once(stack, sample_documents):
    key = _key(stack, "stopped")
    documents = _texts(sample_documents, 9, 800, first=1)
    options = {"long_documents": {"mode": "chunked", "window_tokens": 64}}
    _, whole = _run(stack, key, {"input": {"documents": documents}, **options})
    limit = whole["usage"]["tokens"] * 4 // 10
    final, manifest = _run(stack, key, {"input": {"documents": documents}, "limits": {"max_tokens": limit}, **options})
    assert final["status"] == "cancelled" and final["error"] == manifest["error"]
    assert manifest["error"].startswith(f"budget_exceeded: the job ran {manifest['usage']['tokens']} tokens")
    assert limit < manifest["usage"]["tokens"] == final["usage"]["tokens"]
    rows = [row["id"] for part in manifest["parts"] for row in pq.read_table(io.BytesIO(_read(stack, part["key"]))).to_pylist()]
    errors = [json.loads(line) for line in _read(stack, manifest["errors"]["key"]).decode().splitlines() if line]
    assert {error["code"] for error in errors} <= {"budget_exceeded"}
    # A shard never started holds the documents of its place: shard n has the input's documents 3n .. 3n+2
    unstarted = [documents[3 * shard + i]["id"] for shard in manifest["shards"]["not_started"] for i in range(3)]
    accounted = rows + [error["id"] for error in errors] + unstarted
    assert sorted(accounted) == sorted(d["id"] for d in documents)  # none twice, none missing
    assert 0 < len(rows) < len(documents) and final["counts"]["completed"] == len(rows)
    assert final["counts"]["not_processed"] == len(errors) + len(unstarted) == len(documents) - len(rows)


def test_reused_tokens_are_free(stack, sample_documents):
    key = _key(stack, "reused")
    spec = {"input": {"documents": _texts(sample_documents, 3, 400, first=12)}, "reuse": "tenant"}
    _, first = _run(stack, key, spec)
    final, again = _run(stack, key, {**spec, "limits": {"max_tokens": 1}})
    assert final["status"] == "succeeded" and again["usage"]["tokens"] == 0
    assert again["reuse"]["reused_tokens"] == first["usage"]["tokens"] > 0


def test_a_tenant_past_its_daily_tokens_is_refused_until_midnight_utc(stack, sample_documents):
    key = _key(stack, "daily")
    spec = {"input": {"documents": _texts(sample_documents, 12, 1500, first=20)},
            "long_documents": {"mode": "chunked", "window_tokens": 64}}
    final, manifest = _run(stack, key, spec)
    used = manifest["usage"]["tokens"]
    assert final["status"] == "succeeded" and used >= DAILY, final  # the submit before it was under the ceiling
    with PoolqClient(stack["api_url"], key) as client, pytest.raises(PoolqError) as refused:
        client.submit({"input": {"documents": _texts(sample_documents, 1, 100)}})
    assert refused.value.status_code == 429 and f"ran {used} tokens today" in str(refused.value.detail)
    now = datetime.now(timezone.utc)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    assert abs(refused.value.retry_after - (midnight - now).total_seconds()) < 30
    assert _run(stack, _key(stack, "another"), {"input": {"documents": _texts(sample_documents, 1, 100)}})[0][
        "status"] == "succeeded"
