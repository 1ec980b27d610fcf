"""A job's queue stays O(window): shards are sent a window at a time, refilled as they commit; a
cancel leaves at most a window of cheap tasks; a finished job's late tasks touch nothing."""
import pytest
from support.job_doubles import RecordingEnqueuer, run_task

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.cancel import cancel_job
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.shards.shard_runner import run_shard
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context

WINDOW = 4
SHARDS = 2000  # one document per shard


class _CountingStore:
    """The context's store, counting listings (a leftover task must not list the job)."""

    def __init__(self, store) -> None:
        self._store = store
        self.listings = 0

    def __getattr__(self, name):
        return getattr(self._store, name)

    def list(self, prefix, *args, **kwargs):
        self.listings += 1
        return self._store.list(prefix, *args, **kwargs)


@pytest.fixture
def ctx(tmp_path, minilm_engine):
    settings = Settings(shard_max_documents=1, dispatch_window=WINDOW, max_inline_documents=SHARDS)
    ctx = local_context(tmp_path / "out", settings)
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    ctx.enqueuer = RecordingEnqueuer()
    return ctx


def _planned_job(ctx, shards: int = SHARDS) -> str:
    documents = [{"id": f"d{i}", "text": f"document number {i}"} for i in range(shards)]
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"documents": documents}})).id
    assert ctx.enqueuer.take() == [("plan", job_id)]
    plan_job(JobHandle.bind(ctx, job_id))
    return job_id


def _run(ctx, task) -> None:
    run_task(task, ctx)


def test_planning_sends_one_window_and_each_commit_sends_the_next_shard(ctx):
    # Given a planned job of 2000 shards
    job_id = _planned_job(ctx)
    # Then only the first window is queued
    assert ctx.enqueuer.take() == [("shard", job_id, shard) for shard in range(WINDOW)]
    # When shard 0 commits, Then exactly the next shard is sent
    run_shard(JobHandle.bind(ctx, job_id), 0)
    assert ctx.enqueuer.take() == [("shard", job_id, WINDOW)]
    assert ctx.fair.in_flight(job_id) == [1, 2, 3, 4]
    # And a redelivery of shard 0 counts nothing again and sends nothing more
    run_shard(JobHandle.bind(ctx, job_id), 0)
    assert ctx.enqueuer.take() == []


def test_a_small_job_runs_to_the_end_through_the_window(ctx):
    job_id = _planned_job(ctx, shards=11)
    queued_at_most = 0
    while ctx.enqueuer.tasks:
        queued_at_most = max(queued_at_most, sum(task[0] == "shard" for task in ctx.enqueuer.tasks))
        _run(ctx, ctx.enqueuer.tasks.pop(0))
    assert queued_at_most <= WINDOW
    manifest = JobHandle.bind(ctx, job_id).ledger.manifest()
    assert manifest.status is JobState.SUCCEEDED and manifest.counts.completed == 11 and len(manifest.parts) == 11


def test_a_cancel_of_a_job_with_thousands_of_shards_leaves_a_window_of_one_check_tasks(ctx):
    # Given a job of 2000 shards, 10 of them committed
    job_id = _planned_job(ctx)
    for _ in range(10):
        _run(ctx, ctx.enqueuer.tasks.pop(0))
    # When it is cancelled
    assert cancel_job(JobHandle.bind(ctx, job_id)).status in (JobState.CANCELLING, JobState.CANCELLED)
    ctx.store = counting = _CountingStore(ctx.store)
    # Then what is left to run is at most a window of shard tasks and one finalizer
    shard_tasks = [task for task in ctx.enqueuer.tasks if task[0] == "shard"]
    assert len(shard_tasks) <= WINDOW
    runs = 0
    while ctx.enqueuer.tasks:
        task = ctx.enqueuer.tasks.pop(0)
        runs += 1
        listings_before, queued_before = counting.listings, len(ctx.enqueuer.tasks)
        _run(ctx, task)
        if task[0] == "shard":  # a leftover shard task: one check, no listing, sends nothing (no finalizer)
            assert counting.listings == listings_before and len(ctx.enqueuer.tasks) == queued_before
    assert runs <= WINDOW + 1
    manifest = JobHandle.bind(ctx, job_id).ledger.manifest()
    assert manifest.status is JobState.CANCELLED
    assert manifest.counts.completed == 10 and manifest.counts.not_processed == SHARDS - 10


def test_a_finished_job_drops_its_window_and_late_tasks_bring_nothing_back(ctx):
    job_id = _planned_job(ctx, shards=3)
    while ctx.enqueuer.tasks:
        _run(ctx, ctx.enqueuer.tasks.pop(0))
    assert JobHandle.bind(ctx, job_id).ledger.manifest().status is JobState.SUCCEEDED
    assert ctx.fair.in_flight(job_id) == [] and ctx.fair.cursor(job_id) == 0  # dropped at the finish
    # A late delivery of every shard claims nothing and sends nothing
    for shard in range(3):
        assert run_shard(JobHandle.bind(ctx, job_id), shard) is None
    assert ctx.enqueuer.take() == [] and ctx.fair.cursor(job_id) == 0
