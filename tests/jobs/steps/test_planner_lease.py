"""A planner holds its lease for as long as it plans: no second planner starts meanwhile."""
import threading
import time

from support.job_doubles import RecordingEnqueuer

from poolq.jobs.job import JobSpec
from poolq.jobs.local_runner import local_context
from poolq.jobs.settings import Settings
from poolq.jobs.steps import planner as planner_module
from poolq.jobs.steps.dispatch import PLAN_UNIT
from poolq.jobs.steps.submit import submit_job


def test_a_plan_that_outlasts_its_lease_ttl_keeps_the_lease(tmp_path, monkeypatch):
    # Given leases of 0.3 s and a planner whose reading takes ten times that
    ctx = local_context(tmp_path / "out", Settings(lease_ttl_s=0.3))
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "slow input"}]}}), ctx).id
    reading, done = threading.Event(), threading.Event()
    records = planner_module._records

    def slow_records(*args):
        reading.set()
        time.sleep(3.0)
        yield from records(*args)

    monkeypatch.setattr(planner_module, "_records", slow_records)
    planner = threading.Thread(target=lambda: (planner_module.plan_job(job_id, ctx), done.set()))
    planner.start()
    reading.wait(5)
    # When a second planner tries while the first reads, well past the TTL
    time.sleep(1.0)
    second = ctx.leases.acquire(job_id, PLAN_UNIT, 0.3)
    planner.join(10)
    # Then it is refused, and the first one finished its plan
    assert second is None and done.is_set() and ctx.ledger(job_id).plan().num_shards == 1
