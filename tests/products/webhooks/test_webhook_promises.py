"""Webhook events of a sink load, checked from the outside: "a job that names a sink also sends one
event each time a load into it ends" and delivery is at least once (docs/webhooks.md). A worker
killed after the load's outcome is in the manifest but before its event is queued must still
lead to the event being queued: by the task's redelivery or the reconciler, as for the load itself.
"""
import time

import pytest
from support.job_doubles import RecordingEnqueuer, drain, run_task

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.sink_config import SinkState
from poolq.jobs.steps.submit import submit_job
from poolq.products.sinks import sink_load
from poolq.worker.local_runner import local_context
from poolq.worker.reconciler import reconcile

MODEL = "all-MiniLM-L6-v2"
TENANT = "acme"
HOOK = "https://hooks.example.com/poolq"
JOB_STEPS = frozenset({"plan", "plan_section", "shard", "finalize"})


class Killed(BaseException):
    """kill -9 of the worker: nothing catches it."""


def _queued_events(tasks: list[tuple], job_id: str) -> set[str]:
    return {task[2] for task in tasks if task[0] == "webhook" and task[1] == job_id}


def test_a_load_killed_before_its_event_was_queued_still_sends_sink_succeeded(tmp_path, minilm_engine, monkeypatch):
    settings = Settings(sinks={"search": f"memory://{tmp_path.name}"}, sink_grants={TENANT: ["search"]},
                        webhook_allow=HOOK, lease_ttl_s=60.0)
    ctx = local_context(tmp_path / "out", settings)
    ctx.engines.use(MODEL, minilm_engine)
    ctx.enqueuer = RecordingEnqueuer()
    spec = JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "apples are red"}]}, "sink": "search",
                                   "webhook": {"url": HOOK}})
    job = JobHandle.bind(ctx, submit_job(ctx, spec, tenant=TENANT).id)
    drain(ctx, only=JOB_STEPS)
    sent = ctx.enqueuer.take()
    assert "job-ended" in _queued_events(sent, job.id)
    [load] = [task for task in sent if task[0] == "sink"]

    announce = sink_load.record_sink_outcome

    def killed_once(*args):  # the outcome is in the manifest; the worker dies before queuing its event
        monkeypatch.setattr(sink_load, "record_sink_outcome", announce)
        raise Killed("after the manifest's sink entry was written")

    monkeypatch.setattr(sink_load, "record_sink_outcome", killed_once)
    with pytest.raises(Killed):
        run_task(load, ctx)
    [entry] = job.ledger.manifest().sinks
    assert entry.state == SinkState.SUCCEEDED

    run_task(load, ctx)  # Celery delivers the killed task again (acks late)
    reconcile(ctx, now=time.time() + 600)  # and the reconciler passes, long after
    queued = _queued_events(ctx.enqueuer.take(), job.id)
    assert any(name.startswith("sink.succeeded") for name in queued), \
        f"the load ended succeeded but no sink.succeeded event was queued (queued: {sorted(queued)})"
