"""Job metrics: one contract for the Redis and in-memory recorders, each event counted once
(a redelivered shard, a losing attempt or a repeated finalization adds nothing), and the live
gauges (unfinished jobs, queue depth, shards in flight)."""
from collections import Counter
from dataclasses import replace
from datetime import datetime, timezone

import pytest
import redis

from poolq.jobs.coordination.enqueuer import Enqueuer
from poolq.jobs.coordination.leases import InMemoryLeaseStore, RedisLeaseStore
from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.coordination.redis_status_store import RedisJobStatusStore
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.observability.gauges import InMemorySystemGauges, RedisSystemGauges, gauges_for
from poolq.jobs.observability.job_metrics import LATENCY_BUCKETS_S, InMemoryJobMetrics, RedisJobMetrics, bucket_index
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobStatus
from poolq.jobs.steps.finalizer import finalize_job
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.shards.shard_runner import GAVE_UP_CODE, _attempt, abandon_shard, run_shard
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context, run_job_locally

MODEL = "all-MiniLM-L6-v2"
METRICS_DB = 9  # a database of its own: the metrics and gauge keys are global


@pytest.fixture
def metrics_redis(redis_url):
    client = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + f"/{METRICS_DB}")
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def recorder(request):
    if request.param == "memory":
        return InMemoryJobMetrics()
    return RedisJobMetrics(request.getfixturevalue("metrics_redis"))


@pytest.fixture
def ctx(tmp_path, minilm_engine, recorder):
    ctx = local_context(tmp_path / "out", Settings(shard_max_documents=2, shard_max_chars=20_000))
    ctx.engines.use(MODEL, minilm_engine)
    ctx.metrics = recorder
    return ctx


def _spec(documents: list[dict]) -> JobSpec:
    return JobSpec.model_validate({"model": MODEL, "input": {"documents": documents}})


def test_buckets_follow_prometheus_le():
    assert [bucket_index(x) for x in (0.0, 0.5, 0.51, 600, 601)] == [0, 0, 1, 9, 10]
    assert LATENCY_BUCKETS_S[-1] == float("inf")


def test_recorder_contract(recorder):
    recorder.shard_committed(0.2, 3, 100, Counter({"empty_text": 1}))
    recorder.shard_committed(7.0, 2, 50, Counter())
    recorder.plan_errors(Counter({"empty_text": 2, "missing_id": 1}))
    recorder.plan_errors(Counter())
    recorder.job_finished("succeeded")
    recorder.job_finished("succeeded")
    recorder.job_finished("failed")
    totals = recorder.totals()
    assert (totals.tokens, totals.documents, totals.shards) == (150, 5, 2)
    assert totals.shard_buckets[0] == 1 and totals.shard_buckets[bucket_index(7.0)] == 1
    assert totals.shard_latency_sum_s == pytest.approx(7.2)
    assert totals.errors == {"empty_text": 3, "missing_id": 1}
    assert totals.finished == {"succeeded": 2, "failed": 1}


def test_a_job_records_its_shards_errors_and_outcome_once_even_when_redelivered(ctx):
    documents = [{"id": str(i), "text": f"document number {i}"} for i in range(3)]
    documents += [{"id": "blank", "text": "   "}, {"id": "long", "text": "word " * 2000}]
    status = run_job_locally(ctx, _spec(documents))
    assert status.status is JobState.PARTIALLY_SUCCEEDED
    first = ctx.metrics.totals()
    assert first.shards == 2 and first.documents == 3 and first.tokens == status.usage.tokens > 0
    assert first.errors == {"empty_text": 1, "document_too_long": 1}
    assert first.finished == {"partially_succeeded": 1} and first.shard_latency_sum_s > 0
    for shard in range(2):  # redelivered after the job finished: one check, no work, nothing counted
        assert run_shard(JobHandle.bind(ctx, status.id), shard) is None
    assert finalize_job(JobHandle.bind(ctx, status.id)) is JobState.PARTIALLY_SUCCEEDED
    assert ctx.metrics.totals() == first


def test_an_attempt_that_loses_the_commit_records_nothing(ctx):
    status = run_job_locally(ctx, _spec([{"id": "a", "text": "one"}, {"id": "b", "text": "two"}]))
    before = ctx.metrics.totals()
    lease = ctx.leases.acquire(status.id, "shard-00000", 60)  # a late duplicate of shard 0
    winner = _attempt(JobHandle.bind(ctx, status.id), 0, lease)
    assert winner.attempt != lease.attempt
    assert ctx.metrics.totals() == before


class _HoldingEnqueuer(Enqueuer):
    """Accepts work and never runs it: each step runs when the test calls it."""

    def plan(self, job_id): ...
    def plan_section(self, job_id, stage, section): ...
    def run_shard(self, job_id, shard): ...
    def finalize(self, job_id): ...


def test_an_abandoned_shard_counts_its_records_as_shard_failed(ctx):
    held = replace(ctx, status=InMemoryJobStatusStore(), leases=InMemoryLeaseStore(), enqueuer=_HoldingEnqueuer())
    job = submit_job(held, _spec([{"id": "a", "text": "one"}, {"id": "b", "text": "two"}, {"id": "c", "text": "3"}]))
    assert plan_job(JobHandle.bind(held, job.id)).num_shards == 2
    abandon_shard(JobHandle.bind(held, job.id), 0, "shard 0 failed: boom")
    abandon_shard(JobHandle.bind(held, job.id), 0, "shard 0 failed: boom")  # a repeat finds the commit: nothing more
    totals = held.metrics.totals()
    assert totals.errors == {GAVE_UP_CODE: 2} and totals.shards == 1 and totals.documents == 0


# --- live gauges ----------------------------------------------------------------------------


def _status(job_id: str, state: JobState) -> JobStatus:
    return JobStatus(id=job_id, status=state, model="m", task="embed", created_at=datetime.now(timezone.utc))


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def stores(request):
    if request.param == "memory":
        return InMemoryJobStatusStore(), InMemoryLeaseStore()
    client = request.getfixturevalue("metrics_redis")
    return RedisJobStatusStore(client), RedisLeaseStore(client)


def test_unfinished_jobs_by_state_and_shards_in_flight(stores):
    status, leases = stores
    states = {"a" * 32: JobState.QUEUED, "b" * 32: JobState.RUNNING, "c" * 32: JobState.RUNNING,
              "d" * 32: JobState.CANCELLING, "e" * 32: JobState.FAILED}  # e: failed but never removed
    for job_id, state in states.items():
        status.create(_status(job_id, state))
        status.add_active("t1" if job_id < "c" else "t2", job_id)
    status.create(_status("f" * 32, JobState.SUCCEEDED))  # finished and removed: not active
    gauges = gauges_for(status, leases)
    assert isinstance(gauges, RedisSystemGauges if isinstance(leases, RedisLeaseStore) else InMemorySystemGauges)
    assert gauges.jobs_by_state() == {"queued": 1, "running": 2, "cancelling": 1}
    status.remove_active("t1", "a" * 32)
    assert gauges.jobs_by_state()["queued"] == 0
    held = [leases.acquire("b" * 32, unit, 60) for unit in ("plan", "shard-00000", "shard-00001")]
    leases.acquire("c" * 32, "shard-00003", 60)
    assert gauges.shards_in_flight() == 3
    leases.release(held[1])
    assert gauges.shards_in_flight() == 2


def test_in_memory_queues_are_always_empty():
    assert InMemorySystemGauges(InMemoryJobStatusStore(), InMemoryLeaseStore()).queue_depths() == {
        "control": 0, "gpu": 0, "webhooks": 0}


@pytest.mark.integration
def test_queue_depth_counts_kombu_lists_and_their_priority_lists(metrics_redis, redis_url):
    from poolq.worker.celery_app import create_celery_app

    app = create_celery_app(Settings(redis_url=redis_url.rsplit("/", 1)[0] + f"/{METRICS_DB}"))
    app.send_task("poolq.run_shard", args=["x" * 32, 0], queue="gpu")
    app.send_task("poolq.run_shard", args=["x" * 32, 1], queue="gpu", priority=5)
    app.send_task("poolq.plan_job", args=["x" * 32], queue="control")
    gauges = RedisSystemGauges(metrics_redis, RedisJobStatusStore(metrics_redis))
    assert gauges.queue_depths() == {"control": 1, "gpu": 2, "webhooks": 0}
    assert metrics_redis.llen("gpu") == 1  # the prioritized message sits in a list of its own
