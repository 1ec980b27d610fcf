"""A job's story in the logs (job_events.py): submitted, planned, each shard started and
committed, finished; one JSON line each, every one with the job's id and tenant and what that
step counts. Run in-process (the local runner runs the same steps the workers do)."""


from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_status import LOCAL_TENANT
from poolq.worker.local_runner import run_job_locally


def test_a_jobs_lines_tell_its_story_from_submit_to_finish(local_ctx, json_lines):
    documents = [{"id": f"d{i}", "text": f"document {i} about pooling models"} for i in range(9)]
    documents.append({"id": "blank", "text": "   "})  # rejected while planning: counted as failed
    status = run_job_locally(local_ctx, JobSpec.model_validate({"input": {"documents": documents}}))  # shards of 4
    story = [line for line in json_lines() if line.get("event")]
    assert [line["event"] for line in story] == (
        ["job_submitted", "job_planned"] + ["shard_started", "shard_committed"] * 3 + ["job_finished"]), story
    assert all(line["job_id"] == status.id and line["tenant"] == LOCAL_TENANT for line in story)
    submitted, planned, *shards, finished = story
    assert submitted["documents"] == 10 and submitted["source"] == "inline" and submitted["model"] == status.model
    assert planned["shards"] == 3 and planned["documents"] == 10 and planned["rejected"] == 1
    started, committed = shards[0::2], shards[1::2]
    assert sorted(line["shard"] for line in started) == [0, 1, 2] == sorted(line["shard"] for line in committed)
    assert all(c["attempt"] == s["attempt"] and c["seconds"] >= 0 for s, c in zip(started, committed))
    assert sorted(line["documents"] for line in started) == [1, 4, 4]  # the 9 valid ones, in shards of 4
    assert sum(line["documents"] for line in committed) == 9 and sum(line["failed"] for line in committed) == 0
    assert sum(line["tokens"] for line in committed) == status.usage.tokens > 0
    assert finished["status"] == "partially_succeeded" == status.status.value
    assert (finished["completed"], finished["failed"], finished["total"]) == (9, 1, 10)
    assert finished["message"].startswith(f"job {status.id}: partially_succeeded: 9/10 documents, 1 failed")
