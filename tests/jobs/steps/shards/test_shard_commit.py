"""One commit per shard, whatever happens to its attempts: races, redelivery, poison, cancel.

Tasks are recorded by a step-by-step enqueuer and run by ``_drain`` in FIFO order, so a test
can act between steps. Leases run on a fake clock: a lapse is ``clock.advance``.
"""
import json

import pytest
from support.job_doubles import FakeClock, run_task
from support.job_doubles import RecordingEnqueuer as StepEnqueuer
from support.job_doubles import drain as _drain

from poolq.engine import EngineConfig, PoolingEngine
from poolq.jobs.coordination.leases import InMemoryLeaseStore
from poolq.jobs.coordination.work_units import shard_unit
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.job_ledger import JobLedger
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.cancel import cancel_job
from poolq.jobs.steps.shards.shard_runner import GAVE_UP_CODE, run_shard
from poolq.jobs.steps.submit import submit_job
from poolq.storage import read_embeddings

MODEL = "all-MiniLM-L6-v2"


class CountingEngine:
    """The session's engine, counting ``run`` calls; ``after_first_result(call)`` hooks in mid-run."""

    def __init__(self, inner, after_first_result=None) -> None:
        self.inner, self.after_first_result, self.calls = inner, after_first_result, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, requests, policy=None, **options):
        self.calls += 1
        call = self.calls
        for index, result in enumerate(self.inner.run(requests, policy, **options)):
            yield result
            if index == 0 and self.after_first_result is not None:
                self.after_first_result(call)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ctx(local_ctx, clock, minilm_engine):
    local_ctx.enqueuer = StepEnqueuer()
    local_ctx.leases = InMemoryLeaseStore(clock=clock)
    local_ctx.engines.use(MODEL, CountingEngine(minilm_engine))
    return local_ctx


def _docs(n: int) -> list[dict]:
    return [{"id": f"doc-{i}", "text": f"document number {i} about shards and leases"} for i in range(n)]


def _submit(ctx, docs) -> str:
    """Submit and plan; the shard tasks are left recorded, not run."""
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"documents": docs}})).id
    _drain_kind(ctx, "plan")
    return job_id


def _drain_kind(ctx, kind: str) -> None:
    for task in [t for t in ctx.enqueuer.tasks if t[0] == kind]:
        ctx.enqueuer.tasks.remove(task)
        run_task(task, ctx)


def _engine(ctx) -> CountingEngine:
    return ctx.engines.get(MODEL)


def _commit_markers(ctx, job_id) -> list[str]:
    return [key for key in ctx.store.list(JobHandle.bind(ctx, job_id).layout.work_prefix) if key.endswith(".commit.json")]


def _ids_in_parts_and_errors(ctx, job_id) -> tuple[list[str], list[dict]]:
    manifest = json.loads(ctx.store.get(JobHandle.bind(ctx, job_id).layout.manifest))
    ids = []
    for part in manifest["parts"]:
        ids += read_embeddings(ctx.store.get(part["key"])).column("id").to_pylist()
    errors = [json.loads(line) for line in ctx.store.get(JobHandle.bind(ctx, job_id).layout.errors).decode().splitlines()]
    return ids, errors


def test_two_attempts_of_a_shard_commit_once_and_the_loser_leaves_nothing(ctx, clock, monkeypatch):
    job_id = _submit(ctx, _docs(6))  # shards of 4 and 2
    ttl = ctx.settings.reliability.lease_ttl_s
    losing_commits = []
    original_commit = JobLedger.commit

    def commit(ledger, shard, shard_commit):
        if shard == 0 and not losing_commits:
            # Attempt A has written its part and errors, then stalls past its lease...
            losing_commits.append(shard_commit)
            clock.advance(ttl + 1)
            # ...while attempt B (a redelivery) takes the lapsed lease, runs and commits first
            run_shard(JobHandle.bind(ctx, job_id), 0)
        return original_commit(ledger, shard, shard_commit)

    monkeypatch.setattr(JobLedger, "commit", commit)
    # When attempt A runs shard 0
    winner = run_shard(JobHandle.bind(ctx, job_id), 0)
    # Then both attempts did model work, but only B's outputs count
    (loser,) = losing_commits
    assert _engine(ctx).calls == 2
    assert winner.attempt != loser.attempt and winner == JobHandle.bind(ctx, job_id).ledger.shard_commit(0)
    assert _commit_markers(ctx, job_id) == [JobHandle.bind(ctx, job_id).layout.shard_commit(0)]
    assert not ctx.store.exists(loser.part_key) and not ctx.store.exists(loser.errors_key)
    assert ctx.store.exists(winner.part_key) and ctx.store.exists(winner.errors_key)
    # And the shard is counted once although both attempts reported it
    assert ctx.status.get(job_id).counts.completed == 4
    # When the rest of the job runs, every document is in exactly one part
    _drain(ctx)
    status = ctx.status.get(job_id)
    assert (status.status, status.counts.completed, status.counts.failed) == (JobState.SUCCEEDED, 6, 0)
    ids, errors = _ids_in_parts_and_errors(ctx, job_id)
    assert sorted(ids) == sorted(d["id"] for d in _docs(6)) and errors == []


def test_a_redelivered_shard_after_its_commit_does_no_model_work(ctx):
    job_id = _submit(ctx, _docs(6))
    first = run_shard(JobHandle.bind(ctx, job_id), 0)
    assert _engine(ctx).calls == 1
    # When the same shard task is delivered again (the worker died before acking it)
    again = run_shard(JobHandle.bind(ctx, job_id), 0)
    # Then it returns the commit, runs no model and counts nothing twice
    assert again == first and _engine(ctx).calls == 1
    assert ctx.status.get(job_id).counts.completed == 4
    assert len(list(ctx.store.list(JobHandle.bind(ctx, job_id).layout.parts_prefix))) == 1
    # Also once the job has finished
    _drain(ctx)
    run_shard(JobHandle.bind(ctx, job_id), 0)
    _drain(ctx)
    status = ctx.status.get(job_id)
    assert _engine(ctx).calls == 2 and (status.status, status.counts.completed) == (JobState.SUCCEEDED, 6)


def test_a_delivery_of_a_leased_shard_does_nothing(ctx):
    job_id = _submit(ctx, _docs(6))
    # Given another worker holds shard 1's lease
    held = ctx.leases.acquire(job_id, shard_unit(1), ctx.settings.reliability.lease_ttl_s)
    # When shard 1's task is delivered here
    assert run_shard(JobHandle.bind(ctx, job_id), 1) is None
    # Then no model work, no objects, no commit, and the other attempt still holds the lease
    assert _engine(ctx).calls == 0
    assert list(ctx.store.list(JobHandle.bind(ctx, job_id).layout.parts_prefix)) == []
    assert _commit_markers(ctx, job_id) == []
    assert ctx.leases.holder(job_id, shard_unit(1)) == held.attempt
    assert ctx.status.get(job_id).counts.completed == 0


def test_a_shard_that_crashed_its_worker_too_often_is_committed_as_failed(ctx, clock):
    ctx.settings = ctx.settings.with_values(max_shard_crashes=2)
    docs = _docs(6)
    job_id = _submit(ctx, docs)
    ttl = ctx.settings.reliability.lease_ttl_s
    # Given shard 0 killed its worker twice: two attempts took the lease and never released it
    for _ in range(2):
        assert ctx.leases.acquire(job_id, shard_unit(0), ttl) is not None
        clock.advance(ttl + 1)
    # When its task is delivered again (and the rest of the job runs)
    _drain(ctx)
    # Then shard 0 was not embedded: its records are `shard_failed` errors; shard 1 was embedded
    assert _engine(ctx).calls == 1
    commit = JobHandle.bind(ctx, job_id).ledger.shard_commit(0)
    assert commit.gave_up and commit.part_key is None and commit.errors == 4
    status = ctx.status.get(job_id)
    assert (status.status, status.counts.total, status.counts.completed, status.counts.failed) == (
        JobState.PARTIALLY_SUCCEEDED, 6, 2, 4)
    ids, errors = _ids_in_parts_and_errors(ctx, job_id)
    assert {e["code"] for e in errors} == {GAVE_UP_CODE}
    assert all("2 attempts that crashed" in e["message"] for e in errors)
    # And every record is in exactly one place
    assert sorted(ids + [e["id"] for e in errors]) == sorted(d["id"] for d in docs)
    manifest = JobHandle.bind(ctx, job_id).ledger.manifest()
    assert manifest.shards.model_dump() == {"total": 2, "committed": 2, "gave_up": 1}
    assert manifest.counts.completed == 2 and manifest.counts.failed == 4


def test_cancel_mid_shard_keeps_its_finished_records_and_lists_the_rest_as_not_processed(ctx, minilm_engine):
    ctx.settings = ctx.settings.with_values(cancel_check_interval_s=1e-6)
    docs = _docs(10)  # shards of 4, 4 and 2
    job_id = _submit(ctx, docs)

    def cancel_during_the_second_shard(call: int) -> None:
        if call == 2:
            status = cancel_job(JobHandle.bind(ctx, job_id))
            assert status.status is JobState.CANCELLING  # shard 1 is still running

    # An engine whose steps hold one short document each: a shard runs over several steps
    one_per_step = PoolingEngine(minilm_engine.loaded, EngineConfig(max_num_batched_tokens=16, lookahead_tokens=64))
    ctx.engines.use(MODEL, CountingEngine(one_per_step, after_first_result=cancel_during_the_second_shard))
    # When the shards run and a cancel arrives after shard 1's first result
    _drain(ctx)
    # Then shard 0 stays committed; shard 1 stopped at its next step and committed its first record,
    # listing its other three as not processed; shard 2 never ran
    ledger = JobHandle.bind(ctx, job_id).ledger
    assert sorted(ledger.commits()) == [0, 1]
    assert _engine(ctx).calls == 2
    stopped = ledger.shard_commit(1)
    assert (stopped.documents, stopped.errors, stopped.not_processed) == (1, 3, 3)
    # And the job ended cancelled, its manifest listing the committed parts and the shard that never ran
    manifest = ledger.manifest()
    assert manifest.status is JobState.CANCELLED
    assert [part.shard for part in manifest.parts] == [0, 1] and manifest.shards.not_started == [2]
    assert manifest.counts.model_dump() == {
        "total": 10, "completed": 5, "failed": 0, "not_processed": 5, "carried": 0, "rows": 5}
    status = ctx.status.get(job_id)
    assert (status.status, status.counts.completed, status.counts.failed, status.counts.not_processed) == (
        JobState.CANCELLED, 5, 0, 5)
    # Every record is in exactly one place: a part, the error file (not_processed) or the shard that never ran
    ids, errors = _ids_in_parts_and_errors(ctx, job_id)
    assert {error["code"] for error in errors} == {"not_processed"}
    not_started = [doc["id"] for doc in docs[8:]]
    assert sorted(ids + [error["id"] for error in errors] + not_started) == sorted(doc["id"] for doc in docs)
    assert ctx.leases.live_units(job_id) == []
