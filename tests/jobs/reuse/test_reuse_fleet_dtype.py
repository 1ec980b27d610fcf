"""Tenant reuse in a fleet whose planner computes in another dtype than its compute workers (a CPU
control worker, bf16 GPU workers): planning looks the tenant's outputs up in the workers' engine
(dtype and device kind)."""
import io

import pyarrow.parquet as pq
from support.engine_doubles import CountingEngine
from support.job_doubles import RecordingEnqueuer, run_task

from poolq.jobs.coordination.worker_model_stats import WorkerModelStats
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_objects import REUSE_TABLE_NAME
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context

MODEL = "all-MiniLM-L6-v2"
TENANT = "acme"
DOCS = [{"id": f"d{i}", "text": f"a sentence about topic number {i}, long enough to be a document"} for i in range(4)]


def _spec() -> JobSpec:
    return JobSpec.model_validate({"model": MODEL, "input": {"documents": DOCS}, "reuse": "tenant"})


def _planned_kinds(tmp_path, planner_dtype: str, fleet_dtype: str | None, fleet_device: str = "cpu") -> list[str]:
    """The reuse decisions a planner computing in ``planner_dtype`` makes for the documents a float32
    job stored, while live workers hold the model in ``fleet_dtype``."""
    ctx = local_context(tmp_path / "out", Settings(dtype=planner_dtype))
    ctx.enqueuer = RecordingEnqueuer()
    if fleet_dtype is not None:
        ctx.workers.heartbeat("gpu-worker", 60)
        held = WorkerModelStats(MODEL, fleet_dtype, 1, 0, 1.0, 1 << 20, True, device=fleet_device)
        ctx.workers.report_models("gpu-worker", [held], 60)
    job_id = submit_job(ctx, _spec(), tenant=TENANT).id
    run_task(ctx.enqueuer.take()[0], ctx)  # the plan task alone
    objects = JobHandle.of_tenant(ctx, job_id, TENANT).layout
    table = pq.read_table(io.BytesIO(ctx.store.get(objects.section_object(0, REUSE_TABLE_NAME))))
    return table.column("kind").to_pylist()


def _store_float32_outputs(tmp_path, minilm_engine) -> None:
    ctx = local_context(tmp_path / "out", Settings(dtype="float32"))
    ctx.engines.use(MODEL, CountingEngine(minilm_engine))
    manifest = JobHandle.of_tenant(ctx, submit_job(ctx, _spec(), tenant=TENANT).id, TENANT).ledger.manifest()
    assert manifest is not None and manifest.status is JobState.SUCCEEDED and manifest.engines[0].endswith("/float32")


def test_a_planner_in_another_dtype_finds_what_workers_of_the_fleets_dtype_stored(tmp_path, minilm_engine):
    # Given a tenant's documents computed and stored by float32 workers
    _store_float32_outputs(tmp_path, minilm_engine)
    # When a bfloat16 planner plans them again while live workers hold the model in float32
    kinds = _planned_kinds(tmp_path, "bfloat16", fleet_dtype="float32")
    # Then every document is planned as a copy of the stored output
    assert kinds == ["tenant"] * len(DOCS)


def test_with_no_worker_holding_the_model_a_planner_looks_up_its_own_dtype(tmp_path, minilm_engine):
    _store_float32_outputs(tmp_path, minilm_engine)
    assert _planned_kinds(tmp_path, "bfloat16", fleet_dtype=None) == []  # bf16 outputs: none stored
    assert _planned_kinds(tmp_path, "float32", fleet_dtype=None) == ["tenant"] * len(DOCS)


def test_outputs_computed_on_another_device_kind_are_not_planned_as_copies(tmp_path, minilm_engine):
    # Given float32 outputs computed on CPU, and a fleet of CUDA workers computing in float32
    _store_float32_outputs(tmp_path, minilm_engine)
    # Then nothing is planned as a copy: CUDA's rows would differ in their last bits
    assert _planned_kinds(tmp_path, "float32", fleet_dtype="float32", fleet_device="cuda") == []
