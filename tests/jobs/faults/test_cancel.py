"""Cancelling a job while its shards run, over HTTP."""
import time

import pytest

from poolq.jobs import JobHandle

pytestmark = pytest.mark.integration


def test_cancel_mid_job_over_http(deployment, documents, reference):
    # Given the API and a worker whose shards take ~1.5 s each
    deployment.start_api()
    deployment.start_worker("w1", slow_s=0.5)
    job_id = deployment.submit(documents)
    # When the job is cancelled once a shard is committed and another is running
    ledger = JobHandle.bind(deployment.ctx, job_id).ledger
    deployment.wait(lambda: ledger.commits() and deployment.leases(job_id), 60, "a committed shard and a running one")
    started = time.monotonic()
    with deployment.client() as client:
        assert client.cancel(job_id)["status"] in ("cancelling", "cancelled")
    # Then it is cancelled within a few seconds: the running shard stops between documents
    deployment.wait_state(job_id, "cancelled", timeout=10)
    assert time.monotonic() - started < 5
    # and the manifest lists exactly the committed parts; the counts add up with not_processed
    manifest = deployment.check_outcome(job_id, documents, reference, state="cancelled")
    committed = ledger.commits()
    # (a shard cancelled before any of its records finished commits with no part: all its records not_processed)
    assert sorted(part["key"] for part in manifest["parts"]) == sorted(c.part_key for c in committed.values() if c.part_key)
    counts = manifest["counts"]
    assert 0 < counts["completed"] < len(documents) and counts["not_processed"] > 0
    assert counts["completed"] + counts["failed"] + counts["not_processed"] == counts["total"] == len(documents)
    with deployment.client() as client:
        assert client.results(job_id)["status"] == "cancelled"
