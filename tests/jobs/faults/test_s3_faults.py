"""The object store misbehaving: throttling for a while, a write that landed but was answered
503, and writes that fail for good for one shard."""
import pytest

from poolq.jobs import JobHandle

pytestmark = pytest.mark.integration


def test_s3_slow_down_a_few_times(deployment, documents, reference):
    # Given a worker whose first 4 part uploads are answered 503 SlowDown (3 tries per request:
    # one upload fails even after botocore's retries, and its task is retried)
    deployment.start_worker("w1", s3_503=4, s3_key_substring="/parts/")
    # When a job runs
    job_id = deployment.submit(documents)
    # Then it succeeds exactly
    deployment.check_outcome(job_id, documents, reference)
    assert [fault["mode"] for fault in deployment.events("s3_faults")] == ["first_n"] * 4
    assert any("SlowDown" in line and "retrying" in line for line in deployment.procs[0].log().splitlines())


def test_a_commit_marker_written_but_answered_503(deployment, documents, reference):
    # Given a worker whose first commit-marker write lands in the store but is answered 503, so its
    # retry (If-None-Match: *) finds the marker there: the attempt cannot tell it won
    deployment.start_worker("w1", s3_503_after_write=".commit.json")
    # When a job runs
    job_id = deployment.submit(documents)
    # Then the attempt sees that the marker names it, keeps its part, and the job is exact
    deployment.check_outcome(job_id, documents, reference)
    [fault] = deployment.events("s3_faults")
    assert fault["mode"] == "after_write" and fault["status"] == 200
    assert set(deployment.model_runs_per_document().values()) == {1}


@pytest.mark.settings(s3_max_attempts=1)
def test_s3_failing_for_good_for_one_shards_parts(deployment, documents, reference):
    # Given a worker whose every upload of shard 1's part fails with 503 SlowDown
    deployment.start_worker("w1", s3_fail_key_substring="/parts/part-00001.")
    # When a job runs
    job_id = deployment.submit(documents)
    # Then shard 1 is retried, then committed as failed: its records are errors naming the cause,
    # the other shards' records are embedded, and the job partially succeeds
    shard_1 = {d["id"] for d in documents[3:6]}
    deployment.check_outcome(job_id, documents, reference, state="partially_succeeded",
                             failed={i: "shard_failed" for i in shard_1})
    errors = deployment.ctx.store.get(JobHandle.bind(deployment.ctx, job_id).layout.errors).decode()
    assert "shard 1 failed: StorageError" in errors and "SlowDown" in errors
    from poolq.jobs.steps.failures import MAX_RETRIES
    assert len(deployment.events("s3_faults")) == (MAX_RETRIES + 1) * 2  # 6 task attempts x 2 tries each
