"""Reuse's promise: a copied row equals the row a fresh computation
would write, whichever worker planned the job."""
import json
from dataclasses import replace

import numpy as np
import pytest
from support.engine_doubles import CountingEngine
from support.job_doubles import RecordingEnqueuer, drain

from poolq.engine import PoolingOutput
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.submit import submit_job
from poolq.storage import read_embeddings
from poolq.worker.local_runner import local_context

MODEL = "all-MiniLM-L6-v2"


class DtypeEngine(CountingEngine):
    """The real engine's spec and identity, computing "in" ``dtype``: one constant vector of its own,
    so a row shows which dtype's engine made it."""

    def __init__(self, engine, dtype: str, value: float) -> None:
        super().__init__(engine)
        self.config = replace(engine.config, dtype=dtype)
        self.vector = np.full(engine.dimensions, value, dtype=np.float32)

    def run(self, requests, policy, **options):
        for request in requests:
            self.keys.append(request.key)
            yield PoolingOutput(request.key, self.vector, num_tokens=5, truncated=False, processed_tokens=5)


@pytest.fixture
def ctx(tmp_path, minilm_engine):
    context = local_context(tmp_path / "out", Settings(shard_max_documents=4))
    context.engines.use(MODEL, DtypeEngine(minilm_engine, "bfloat16", 0.5))
    context.engines.use(MODEL, DtypeEngine(minilm_engine, "float32", 0.25))
    return context


def _worker_dtype(ctx, dtype: str) -> None:
    """This process now acts as a worker whose own dtype (Settings.serving.dtype) is ``dtype``."""
    ctx.engines.config = replace(ctx.engines.config, dtype=dtype)


def _rows(ctx, job_id: str) -> dict[str, dict]:
    manifest = JobHandle.bind(ctx, job_id).ledger.manifest()
    assert manifest is not None and manifest.status is JobState.SUCCEEDED, manifest
    return {row["id"]: row for part in manifest.parts for row in read_embeddings(ctx.store.get(part.key)).to_pylist()}


def test_a_job_planned_where_the_dtype_differs_copies_no_vector_of_another_dtype(ctx, tmp_path):
    # Given a tenant's earlier reuse job computed in bfloat16 (a GPU fleet's auto dtype)
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": f"document number {i}"}) + "\n" for i in range(6)))
    spec = JobSpec.model_validate({"model": MODEL, "input": {"uri": path.as_uri()}, "reuse": "tenant"})
    _worker_dtype(ctx, "bfloat16")
    first = submit_job(ctx, spec, tenant="acme")
    assert {row["embedding"][0] for row in _rows(ctx, first.id).values()} == {0.5}
    # When the same job again is planned by a worker whose own dtype is bfloat16 (a control worker on an
    # AMX CPU, say), and its shards run on workers computing in float32, which claim the job's dtype
    ctx.enqueuer = RecordingEnqueuer()
    second = submit_job(ctx, spec, tenant="acme")
    drain(ctx, only=frozenset({"plan", "plan_section"}))
    _worker_dtype(ctx, "float32")
    drain(ctx)
    # Then every row is the float32 engine's, as a fresh computation of this job writes it: the job's rows
    # come from one engine identity (float32), and none is a copy of a bfloat16 vector stored under another scope
    rows = _rows(ctx, second.id)
    manifest = JobHandle.bind(ctx, second.id).ledger.manifest()
    assert [engine for engine in manifest.engines] and all("float32" in str(e) for e in manifest.engines), manifest.engines
    assert {row["embedding"][0] for row in rows.values()} == {0.25}, "rows copied from the bfloat16 scope"
