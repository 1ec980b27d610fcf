"""A planner holds its lease for as long as it plans: no second planner starts meanwhile."""
import threading
import time

from support.job_doubles import RecordingEnqueuer

from poolq.jobs.coordination.work_units import PLAN_UNIT
from poolq.jobs.inputs.shard_input import ShardInput
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import SectionStage
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps import planner as planner_module
from poolq.jobs.steps import planning_stages
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context


def test_a_plan_that_outlasts_its_lease_ttl_keeps_the_lease(tmp_path, monkeypatch):
    # Given leases of 0.3 s and a planner whose reading takes ten times that
    ctx = local_context(tmp_path / "out", Settings(lease_ttl_s=0.3))
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "slow input"}]}})).id
    reading, done = threading.Event(), threading.Event()
    scan = planning_stages.STAGE_STEPS[SectionStage.SCAN]

    def slow_scan(*args):
        reading.set()
        time.sleep(3.0)
        return scan(*args)

    monkeypatch.setitem(planning_stages.STAGE_STEPS, SectionStage.SCAN, slow_scan)
    planner = threading.Thread(target=lambda: (planner_module.plan_job(JobHandle.bind(ctx, job_id)), done.set()))
    planner.start()
    reading.wait(5)
    # When a second planner tries while the first reads, well past the TTL
    time.sleep(1.0)
    second = ctx.leases.acquire(job_id, PLAN_UNIT, 0.3)
    planner.join(10)
    # Then it is refused, and the first one finished its plan
    assert second is None and done.is_set() and JobHandle.bind(ctx, job_id).ledger.plan().num_shards == 1


def test_shards_are_cut_by_estimated_work_not_only_by_documents(tmp_path):
    # Given a budget of ~100 estimated tokens per shard and documents of ~25 and ~250 tokens
    settings = Settings(shard_work_s=1.0, shard_tokens_per_s=100.0, shard_max_documents=1000)
    ctx = local_context(tmp_path / "out", settings)
    ctx.enqueuer = RecordingEnqueuer()
    short = [{"id": f"s{i}", "text": "x" * 90} for i in range(8)]  # 25 estimated tokens each
    long = [{"id": "long", "text": "y" * 1000}]  # over the budget alone: a shard of its own
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"documents": short + long}})).id
    planner_module.plan_job(JobHandle.bind(ctx, job_id))
    # Then the short ones go four to a shard, and the long one is alone
    layout = JobHandle.bind(ctx, job_id).layout
    sizes = [ShardInput.from_bytes(ctx.store.get(layout.shard_input(0, shard))).documents for shard in range(3)]
    assert JobHandle.bind(ctx, job_id).ledger.plan().num_shards == 3 and sizes == [4, 4, 1]
