"""A sink load is queued after the manifest and before the job leaves the active list, so no job ends
with its load never sent: a broker that refuses the task leaves the job active for the reconciler,
and the reconciler queues the load of a job whose finalizer died after the manifest. Jobs run in
process with recorded tasks (drained in order) and the in-process sink."""
import pytest
from support.job_doubles import RecordingEnqueuer, drain

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.sink_config import SinkState
from poolq.jobs.steps.submit import submit_job
from poolq.products.sinks.stores.memory_sink import MemorySink
from poolq.worker.local_runner import local_context
from poolq.worker.reconciler import reconcile

TENANT = "acme"
DOCUMENTS = 6
UNTIL_THE_MANIFEST = frozenset({"plan", "plan_section", "shard"})


class BrokerDown(RecordingEnqueuer):
    def load_sinks(self, job_id):
        raise ConnectionError("the broker is down")


@pytest.fixture
def ctx(tmp_path, minilm_engine):
    settings = Settings(shard_max_documents=4, sinks={"search": f"memory://{tmp_path.name}"},
                        sink_grants={TENANT: ["search"]})
    context = local_context(tmp_path / "out", settings)
    context.engines.use("all-MiniLM-L6-v2", minilm_engine)
    context.enqueuer = RecordingEnqueuer()
    return context


@pytest.fixture
def sink_rows(tmp_path):
    return MemorySink.named(tmp_path.name).rows  # what the sink named "search" holds


def _submit(ctx) -> JobHandle:
    documents = [{"id": f"d{i}", "text": f"document number {i} for the sink"} for i in range(DOCUMENTS)]
    spec = JobSpec.model_validate({"input": {"documents": documents}, "sink": "search"})
    return JobHandle.bind(ctx, submit_job(ctx, spec, tenant=TENANT).id)


def _sink_entry(job: JobHandle):
    (entry,) = job.ledger.manifest().sinks
    return entry


def _sink_tasks(ctx) -> list[tuple]:
    return [task for task in ctx.enqueuer.tasks if task[0] == "sink"]


def _active(job: JobHandle) -> bool:
    return job.ctx.store.exists(job.ctx.service_layout.active(job.id))


def test_a_broker_that_refuses_the_load_leaves_the_job_active_and_the_reconciler_queues_it(ctx, sink_rows):
    recording = ctx.enqueuer
    ctx.enqueuer = BrokerDown()
    job = _submit(ctx)
    drain(ctx, only=UNTIL_THE_MANIFEST)
    with pytest.raises(ConnectionError):  # the finalize task fails: it is retried
        drain(ctx, only=frozenset({"finalize"}))
    assert ctx.status.get(job.id).status is JobState.SUCCEEDED  # ended, whatever happens to its load
    assert _sink_entry(job).state == SinkState.PENDING and _active(job)

    ctx.enqueuer = recording  # the broker is back
    reconcile(ctx)
    assert _sink_tasks(ctx) == [("sink", job.id)]
    assert not _active(job)  # cleaned up once the load is queued
    drain(ctx, only=frozenset({"sink"}))
    assert _sink_entry(job).state == SinkState.SUCCEEDED and _sink_entry(job).upserted == DOCUMENTS
    assert sorted(key for key, _ in sink_rows) == [f"d{i}" for i in range(DOCUMENTS)]


def test_the_reconciler_queues_the_load_of_a_job_whose_finalizer_died_after_the_manifest(ctx, sink_rows):
    from poolq.jobs.steps import finalizer

    job = _submit(ctx)
    drain(ctx, only=UNTIL_THE_MANIFEST)
    finalizer._write_manifest(job, finalizer._build_manifest(job))  # ... and the process died here
    ctx.enqueuer.take()
    assert _sink_entry(job).state == SinkState.PENDING and _active(job)

    reconcile(ctx)
    assert _sink_tasks(ctx) == [("sink", job.id)]
    drain(ctx, only=frozenset({"sink"}))
    assert _sink_entry(job).state == SinkState.SUCCEEDED and len(sink_rows) == DOCUMENTS


def test_a_finalize_task_delivered_again_after_the_load_ended_queues_nothing(ctx):
    job = _submit(ctx)
    drain(ctx, only=UNTIL_THE_MANIFEST | {"finalize", "sink"})
    assert _sink_entry(job).state == SinkState.SUCCEEDED
    ctx.enqueuer.take()

    ctx.enqueuer.finalize(job.id)  # a duplicate message
    drain(ctx, only=frozenset({"finalize"}))
    assert _sink_tasks(ctx) == [] and _sink_entry(job).upserted == DOCUMENTS
