"""A job's status shows its sink loads (``sinks``), as the manifest has them: pending once the job
ends, then what the load did or why it failed, pending again on a retry, and rebuilt from the
manifest when the status cache lost them. Jobs run in process with recorded tasks and the
in-process sink."""
import pytest
from support.job_doubles import RecordingEnqueuer, drain

from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.sink_config import SinkState
from poolq.jobs.status.current_status import current_status
from poolq.jobs.steps.submit import submit_job
from poolq.products.sinks.sink import SinkError
from poolq.products.sinks.sink_entries import retry_sinks
from poolq.products.sinks.sink_load import fail_sinks
from poolq.worker.local_runner import local_context

TENANT = "acme"
DOCUMENTS = 5
JOB_STEPS = frozenset({"plan", "plan_section", "shard", "finalize"})


def _context(tmp_path, engine, sink: dict) -> object:
    settings = Settings(shard_max_documents=4, sinks={"search": sink}, sink_grants={TENANT: ["search"]})
    ctx = local_context(tmp_path / "out", settings)
    ctx.engines.use("all-MiniLM-L6-v2", engine)
    ctx.enqueuer = RecordingEnqueuer()
    return ctx


def _finished_job(ctx) -> JobHandle:
    documents = [{"id": f"d{i}", "text": f"document number {i} for the status"} for i in range(DOCUMENTS)]
    spec = JobSpec.model_validate({"input": {"documents": documents}, "sink": "search"})
    job = JobHandle.bind(ctx, submit_job(ctx, spec, tenant=TENANT).id)
    drain(ctx, only=JOB_STEPS)
    return job


def _sinks(job: JobHandle) -> list[dict]:
    return [sink.model_dump(exclude={"finished_at"}) for sink in current_status(job).sinks]


def test_the_status_shows_the_load_pending_then_what_it_did(tmp_path, minilm_engine):
    ctx = _context(tmp_path, minilm_engine, {"url": f"memory://{tmp_path.name}"})
    job = _finished_job(ctx)
    assert _sinks(job) == [{"name": "search", "state": SinkState.PENDING, "upserted": 0, "deleted": 0,
                            "unchanged": 0, "error": None}]
    drain(ctx, only=frozenset({"sink"}))
    assert _sinks(job) == [{"name": "search", "state": SinkState.SUCCEEDED, "upserted": DOCUMENTS, "deleted": 0,
                            "unchanged": 0, "error": None}]
    assert current_status(job).sinks[0].finished_at is not None


def test_a_failed_load_shows_its_error_then_pending_again_on_a_retry(tmp_path, minilm_engine):
    ctx = _context(tmp_path, minilm_engine, {"url": f"memory://{tmp_path.name}", "create_table": False})
    job = _finished_job(ctx)
    with pytest.raises(SinkError) as raised:  # the in-process sink has no table and may not make one
        drain(ctx, only=frozenset({"sink"}))
    fail_sinks(job, raised.value)  # the worker's give-up (a SinkError is not retried)
    (failed,) = current_status(job).sinks
    assert failed.state == SinkState.FAILED and "table does not exist" in failed.error
    assert current_status(job).status.value == "succeeded"  # the sink failed, not the job

    assert retry_sinks(job) == ["search"]
    assert [(sink.state, sink.error) for sink in current_status(job).sinks] == [(SinkState.PENDING, None)]


def test_a_status_rebuilt_from_the_ledger_shows_the_manifests_sinks(tmp_path, minilm_engine):
    ctx = _context(tmp_path, minilm_engine, {"url": f"memory://{tmp_path.name}"})
    job = _finished_job(ctx)
    drain(ctx, only=frozenset({"sink"}))
    ctx.status = InMemoryJobStatusStore()  # Redis lost everything: the ledger has the truth
    assert [(sink.name, sink.state, sink.upserted) for sink in current_status(job).sinks] == \
        [("search", SinkState.SUCCEEDED, DOCUMENTS)]


def test_a_job_naming_no_sink_shows_none(tmp_path, minilm_engine):
    ctx = _context(tmp_path, minilm_engine, {"url": f"memory://{tmp_path.name}"})
    documents = [{"id": "d0", "text": "no sink here"}]
    job = JobHandle.bind(ctx, submit_job(ctx, JobSpec.model_validate({"input": {"documents": documents}}),
                                         tenant=TENANT).id)
    drain(ctx, only=JOB_STEPS)
    assert current_status(job).status.value == "succeeded" and current_status(job).sinks is None


def test_a_finalize_task_delivered_again_does_not_undo_the_loads_state(tmp_path, minilm_engine):
    from poolq.jobs.steps.finalizer import sync_status

    ctx = _context(tmp_path, minilm_engine, {"url": f"memory://{tmp_path.name}"})
    job = _finished_job(ctx)
    read_before_the_load = job.ledger.manifest()  # a duplicate finalize task read it here
    drain(ctx, only=frozenset({"sink"}))
    sync_status(job, read_before_the_load)
    assert [sink.state for sink in current_status(job).sinks] == [SinkState.SUCCEEDED]
