"""One contract for the job status store: Redis (real server) and the in-memory one."""
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import pytest
import redis

from jobs.job import JobState, JobStatus
from jobs.status_store import InMemoryJobStatusStore, RedisJobStatusStore


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def status_store(request):
    if request.param == "memory":
        return InMemoryJobStatusStore()
    return RedisJobStatusStore(redis.Redis.from_url(request.getfixturevalue("redis_url")))


def _new_job(store) -> str:
    job_id = uuid.uuid4().hex
    store.create(JobStatus(id=job_id, status=JobState.QUEUED, model="m", task="embed", created_at=datetime.now(timezone.utc)))
    return job_id


def test_unknown_job_is_none(status_store):
    assert status_store.get("nope") is None


def test_create_update_and_read_back(status_store):
    job_id = _new_job(status_store)
    job = status_store.get(job_id)
    assert (job.status, job.counts.total, job.counts.completed, job.result) == (JobState.QUEUED, None, 0, None)
    status_store.update(job_id, status=JobState.SUCCEEDED, total=5, manifest_uri="s3://b/k/manifest.json")
    status_store.add_progress(job_id, completed=4, failed=1, tokens=99)
    job = status_store.get(job_id)
    assert job.status is JobState.SUCCEEDED
    assert (job.counts.total, job.counts.completed, job.counts.failed, job.usage.tokens) == (5, 4, 1, 99)
    assert job.result.manifest_uri == "s3://b/k/manifest.json"


def test_counters_are_atomic_under_concurrency(status_store):
    job_id = _new_job(status_store)
    with ThreadPoolExecutor(8) as pool:
        values = list(pool.map(lambda _: status_store.add(job_id, "shards_done", 1), range(200)))
    assert sorted(values) == list(range(1, 201))  # exactly one caller sees each count, e.g. the last


def test_unknown_counter_is_refused(status_store):
    with pytest.raises(ValueError, match="unknown counter"):
        status_store.add(_new_job(status_store), "bogus", 1)
