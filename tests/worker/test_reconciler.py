"""The reconciler makes Redis agree with the ledger and keeps jobs moving.

Tasks are recorded, not run (``_drain`` runs them when a test wants); status and leases are
in memory, leases on a fake clock. "Sent long ago" is written into the dispatch times.
"""
import time
import uuid

import pytest
import redis
from support.api_client import authed_client
from support.job_doubles import FakeClock, RecordingEnqueuer, drain

from poolq.engine import ModelRegistry
from poolq.jobs.context import JobContext
from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE
from poolq.jobs.coordination.leases import InMemoryLeaseStore
from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.coordination.redis_status_store import RedisJobStatusStore
from poolq.jobs.coordination.work_units import FINALIZE_UNIT, PLAN_UNIT, shard_unit
from poolq.jobs.engine_pool import EnginePool
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.cleanup import delete_dead_attempts
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.shards.shard_runner import run_shard
from poolq.jobs.steps.submit import submit_job
from poolq.worker.reconciler import reconcile


def _drain(ctx) -> None:
    drain(ctx)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ctx(local_ctx, clock):
    local_ctx.enqueuer = RecordingEnqueuer()
    local_ctx.leases = InMemoryLeaseStore(clock=clock)
    return local_ctx


DOCS = [{"id": f"doc-{i}", "text": f"reconciled document {i}"} for i in range(10)] + [{"id": "blank", "text": "   "}]


def _submit(ctx, docs=DOCS) -> str:
    return submit_job(ctx, JobSpec.model_validate({"input": {"documents": docs}})).id


def _planned(ctx) -> str:
    """A job planned into 3 shards (4, 4, 2 documents; one blank record is a planning error)."""
    job_id = _submit(ctx)
    ctx.enqueuer.take()
    plan_job(JobHandle.bind(ctx, job_id))
    assert [t[2] for t in ctx.enqueuer.take()] == [0, 1, 2]
    return job_id


def _sent_long_ago(ctx, job_id, units) -> None:
    ctx.status.note_dispatch(job_id, units, time.time() - 2 * ctx.settings.reliability.requeue_after_s)


def test_lost_shard_messages_are_resent_unless_running_or_recently_sent(ctx):
    job_id = _planned(ctx)
    run_shard(JobHandle.bind(ctx, job_id), 0)  # shard 0 is committed
    ctx.enqueuer.take()
    # Just sent: nothing is lost yet
    assert reconcile(ctx).resent == [] and ctx.enqueuer.tasks == []
    # Given the shard tasks were sent long ago and shard 1 is running elsewhere
    _sent_long_ago(ctx, job_id, [shard_unit(s) for s in range(3)])
    ctx.leases.acquire(job_id, shard_unit(1), 60)
    # Then only shard 2 is sent again
    report = reconcile(ctx)
    assert report.resent == [f"{job_id}/shard-00002"] and ctx.enqueuer.take() == [("shard", job_id, 2)]
    # And a second pass right after does not send it again
    assert reconcile(ctx).resent == [] and ctx.enqueuer.tasks == []


def test_tasks_waiting_behind_a_backlog_are_not_resent_until_their_queue_drains(ctx):
    # Given shard tasks sent long ago and never consumed, while the GPU queue holds a backlog
    job_id = _planned(ctx)
    _sent_long_ago(ctx, job_id, [shard_unit(s) for s in range(3)])
    ctx.enqueuer.depths = {GPU_QUEUE: 500}
    # Then none is sent again: each is most likely still waiting in the queue
    assert reconcile(ctx).resent == [] and ctx.enqueuer.tasks == []
    # And once the queue is empty they are known lost, and are sent again
    ctx.enqueuer.depths = {GPU_QUEUE: 0, CONTROL_QUEUE: 7}  # the control queue's backlog is not theirs
    assert reconcile(ctx).resent == [f"{job_id}/shard-0000{s}" for s in range(3)]


def test_a_backlog_never_holds_back_a_task_whose_attempt_died(ctx, clock):
    # Given shard 1 consumed by a worker that died, while the GPU queue holds a backlog
    job_id = _planned(ctx)
    ctx.leases.acquire(job_id, shard_unit(1), ctx.settings.reliability.lease_ttl_s)
    clock.advance(ctx.settings.reliability.lease_ttl_s + 1)
    ctx.enqueuer.depths = {GPU_QUEUE: 500}
    # Then it is sent again at once: its message was consumed, so it is not in the queue
    assert reconcile(ctx).resent == [f"{job_id}/shard-00001"]


def test_a_shard_whose_attempt_died_is_resent_at_once(ctx, clock):
    job_id = _planned(ctx)
    # Given shard 1's task was consumed and its worker died (the lease lapsed, never released)
    ctx.leases.acquire(job_id, shard_unit(1), ctx.settings.reliability.lease_ttl_s)
    assert reconcile(ctx).resent == []  # still leased
    clock.advance(ctx.settings.reliability.lease_ttl_s + 1)
    # Then it is sent again without waiting for requeue_after_s
    assert reconcile(ctx).resent == [f"{job_id}/shard-00001"]
    assert ctx.enqueuer.take() == [("shard", job_id, 1)]


def test_a_lost_plan_is_resent(ctx):
    job_id = _submit(ctx)
    assert ctx.enqueuer.take() == [("plan", job_id)]
    assert reconcile(ctx).resent == []
    # While a planner holds the plan lease nothing is sent, even long after
    _sent_long_ago(ctx, job_id, [PLAN_UNIT])
    lease = ctx.leases.acquire(job_id, PLAN_UNIT, 60)
    assert reconcile(ctx).resent == []
    ctx.leases.release(lease)
    # Not leased, sent long ago: sent again, and the job then runs to the end
    _sent_long_ago(ctx, job_id, [PLAN_UNIT])
    assert reconcile(ctx).resent == [f"{job_id}/plan"]
    _drain(ctx)
    assert ctx.status.get(job_id).status is JobState.PARTIALLY_SUCCEEDED


def test_a_job_whose_shards_are_all_committed_gets_a_finalize(ctx):
    job_id = _planned(ctx)
    for shard in range(3):
        run_shard(JobHandle.bind(ctx, job_id), shard)
    # The last commit sent the finalizer; that message is lost
    assert ctx.enqueuer.take() == [("finalize", job_id)]
    assert reconcile(ctx).resent == []
    _sent_long_ago(ctx, job_id, [FINALIZE_UNIT])
    assert reconcile(ctx).resent == [f"{job_id}/finalize"]
    _drain(ctx)
    status = ctx.status.get(job_id)
    assert (status.status, status.counts.completed, status.counts.failed) == (JobState.PARTIALLY_SUCCEEDED, 10, 1)


def test_a_wiped_status_store_is_rebuilt_from_the_ledger(ctx):
    job_id = _planned(ctx)
    run_shard(JobHandle.bind(ctx, job_id), 0)
    ctx.enqueuer.take()
    # When Redis loses everything
    ctx.status = InMemoryJobStatusStore()
    report = reconcile(ctx)
    # Then the status is rebuilt: running, with the plan's total and the committed shard's counts
    assert report.recovered == [job_id]
    status = ctx.status.get(job_id)
    assert (status.status, status.counts.total, status.counts.completed, status.counts.failed) == (
        JobState.RUNNING, 11, 4, 1)
    assert ctx.status.field(job_id, "num_shards") == "3"
    # And GET through the API returns it
    api = authed_client(ctx)
    body = api.get(f"/v1/jobs/{job_id}").json()
    assert body["status"] == "running" and body["counts"] == {"total": 11, "completed": 4, "failed": 1, "not_processed": 0}
    # The uncommitted shards' dispatch times were lost with it: they are sent again
    assert sorted(report.resent) == [f"{job_id}/shard-00001", f"{job_id}/shard-00002"]
    # And the job finishes with each shard counted once
    _drain(ctx)
    status = ctx.status.get(job_id)
    assert (status.status, status.counts.completed, status.counts.failed) == (JobState.PARTIALLY_SUCCEEDED, 10, 1)


@pytest.mark.parametrize("status_store", ["memory", pytest.param("redis", marks=pytest.mark.integration)])
def test_a_status_wiped_while_a_shard_runs_is_rebuilt(ctx, status_store, request):
    if status_store == "redis":
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
        ctx.status = RedisJobStatusStore(client)
    job_id = _planned(ctx)
    # Given Redis loses the job while shard 1 runs: the shard's count lands on an empty record
    if status_store == "redis":
        client.delete(*client.keys(f"poolq:job:{job_id}*"))
    else:
        ctx.status = InMemoryJobStatusStore()
    run_shard(JobHandle.bind(ctx, job_id), 1)
    ctx.enqueuer.take()
    # When the reconciler passes
    assert reconcile(ctx).recovered == [job_id]
    # Then the status is rebuilt from the ledger, and the job finishes with each shard counted once
    status = ctx.status.get(job_id)
    assert (status.status, status.counts.completed, status.counts.failed) == (JobState.RUNNING, 4, 1)
    _drain(ctx)
    status = ctx.status.get(job_id)
    assert (status.status, status.counts.completed, status.counts.failed) == (JobState.PARTIALLY_SUCCEEDED, 10, 1)


def test_get_recovers_a_status_redis_lost_without_a_reconcile(ctx):
    job_id = _planned(ctx)
    ctx.status = InMemoryJobStatusStore()
    body = authed_client(ctx).get(f"/v1/jobs/{job_id}").json()
    assert body["status"] == "running" and body["counts"] == {"total": 11, "completed": 0, "failed": 1, "not_processed": 0}


def test_a_committed_shard_deletes_what_its_dead_attempts_left_and_nothing_else(ctx):
    job_id = _planned(ctx)
    layout = JobHandle.bind(ctx, job_id).layout
    winner = run_shard(JobHandle.bind(ctx, job_id), 0)
    ctx.enqueuer.take()
    # Given objects of a dead attempt of committed shard 0, and of a running attempt of shard 1
    dead = [layout.attempt_part(0, "0bad0bad0bad0bad"), layout.attempt_errors(0, "0bad0bad0bad0bad")]
    running = [layout.attempt_part(1, "1234123412341234"), layout.attempt_errors(1, "1234123412341234")]
    for key in dead + running:
        ctx.store.put(key, b"x")
    # When shard 0's cleanup runs (its winning attempt does this when earlier attempts crashed)
    assert delete_dead_attempts(JobHandle.bind(ctx, job_id), 0, winner.attempt) == 2
    # Then only the dead attempt's objects are gone
    assert not any(ctx.store.exists(key) for key in dead)
    assert all(ctx.store.exists(key) for key in running + [winner.part_key, winner.errors_key])


class _CountingStore:
    """The context's store, counting reads of commit markers and listings."""

    def __init__(self, store) -> None:
        self._store = store
        self.marker_reads = 0
        self.listings: list[str] = []

    def __getattr__(self, name):
        return getattr(self._store, name)

    def get(self, key, *args, **kwargs):
        self.marker_reads += key.endswith(".commit.json")
        return self._store.get(key, *args, **kwargs)

    def list(self, prefix, *args, **kwargs):
        self.listings.append(prefix)
        return self._store.list(prefix, *args, **kwargs)


def test_a_pass_over_a_running_job_costs_its_window_not_its_shards(ctx):
    # Given a running job with two committed shards
    job_id = _planned(ctx)
    [run_shard(JobHandle.bind(ctx, job_id), shard) for shard in (0, 1)]
    ctx.enqueuer.take()
    ctx.store = counting = _CountingStore(ctx.store)
    # When the reconciler passes: no commit marker is read, and neither work/ nor parts/ is listed
    reconcile(ctx)
    layout = JobHandle.bind(ctx, job_id).layout
    assert counting.marker_reads == 0
    assert not [prefix for prefix in counting.listings if prefix in (layout.work_prefix, layout.parts_prefix)]


def test_a_finished_job_leaves_the_active_list(ctx):
    job_id = _submit(ctx)
    _drain(ctx)
    assert ctx.status.get(job_id).status is JobState.PARTIALLY_SUCCEEDED
    assert not ctx.store.exists(ctx.service_layout.active(job_id))
    report = reconcile(ctx)
    assert (report.jobs, report.recovered, report.resent, report.finalized) == (0, [], [], [])


def test_a_finished_job_whose_clean_up_died_is_cleaned_up(ctx):
    job_id = _submit(ctx)
    _drain(ctx)
    # Given the finalizer died after the manifest, before taking the job off the active list
    ctx.store.put(ctx.service_layout.active(job_id), b"{}")
    ctx.status = InMemoryJobStatusStore()
    report = reconcile(ctx)
    assert report.finalized == [job_id] and ctx.enqueuer.tasks == []
    status = ctx.status.get(job_id)
    assert (status.status, status.counts.completed, status.counts.failed) == (JobState.PARTIALLY_SUCCEEDED, 10, 1)
    assert not ctx.store.exists(ctx.service_layout.active(job_id))
    assert reconcile(ctx).jobs == 0


@pytest.mark.integration
def test_stale_multipart_uploads_of_the_job_are_aborted_and_no_others(new_buckets, tmp_path):
    store = new_buckets.store("reconcile")
    client, bucket = store.client, store.bucket
    settings = Settings(store="s3", bucket=bucket, stale_upload_s=0.001)
    registry = ModelRegistry.with_packaged_models({})
    ctx = JobContext(settings, store, InMemoryJobStatusStore(), InMemoryLeaseStore(), RecordingEnqueuer(), registry,
                     EnginePool(registry, settings.serving.engine_config()))
    job_id = _submit(ctx)
    layout = JobHandle.bind(ctx, job_id).layout

    def start_upload(key: str) -> None:
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=b"z" * 1024)

    # Given a writer of this job died mid-upload, and uploads elsewhere are in progress
    mine = layout.attempt_part(0, "dead0000dead0000")
    others = [f"jobs/{uuid.uuid4().hex}/parts/part-00000.x.parquet", f"jobs/{job_id}-sibling/x", "elsewhere/big.bin"]
    for key in [mine, *others]:
        start_upload(key)
    time.sleep(0.01)  # older than stale_upload_s
    # When the reconciler passes
    report = reconcile(ctx)
    # Then the job's upload is aborted, and the others are untouched
    assert report.aborted_uploads == 1
    assert store.pending_uploads(layout.root + "/") == []
    assert sorted(upload.key for upload in store.pending_uploads("")) == sorted(others)
    for upload in store.pending_uploads(""):
        store.abort_upload(upload)


def test_a_plan_whose_publishing_was_lost_is_published_by_the_reconciler(ctx, monkeypatch):
    # Given a job whose planner wrote plan.json, then lost Redis before caching it or sending shards
    from poolq.jobs.steps import planner

    job_id = _submit(ctx)
    ctx.enqueuer.take()
    monkeypatch.setattr(planner, "publish_plan", lambda *args: None)
    plan_job(JobHandle.bind(ctx, job_id))
    monkeypatch.undo()
    assert JobHandle.bind(ctx, job_id).ledger.plan() is not None and ctx.status.field(job_id, "num_shards") is None
    # When the reconciler passes and the work it sends runs
    report = reconcile(ctx)
    assert ctx.status.field(job_id, "num_shards") == "3", report
    _drain(ctx)
    # Then the shards ran, and the job finished
    assert JobHandle.bind(ctx, job_id).ledger.manifest() is not None
    assert ctx.status.get(job_id).status is JobState.PARTIALLY_SUCCEEDED  # the blank document is an error


def test_a_pass_deletes_the_files_past_their_expiry(ctx):
    import io

    from poolq.products.batches.batch_files import create_file, get_file

    due = create_file(ctx, "acme", "in.jsonl", "batch", io.BytesIO(b"{}\n"), max_bytes=1 << 20, expires_after_s=3600)
    tenant_area = ctx.service_layout.tenant_key("acme", "")
    assert reconcile(ctx, now=time.time()).expired_files == 0
    assert len(list(ctx.store.list(tenant_area))) == 2
    assert reconcile(ctx, now=time.time() + 3601).expired_files == 1
    assert not list(ctx.store.list(tenant_area))  # record and content gone
    with pytest.raises(LookupError):
        get_file(ctx, "acme", due.id)
