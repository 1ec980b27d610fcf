"""A record the engine cannot make a good row for fails alone: every other record of its shard is in the
parts, and every record of the job is in exactly one place (a part or the error file)."""
import dataclasses
import json

import numpy as np
import torch
from support.engine_doubles import ConstantVectorEngine

from poolq.engine import EngineConfig, MultiOutput, PoolingEngine, PoolingOutput, PoolingTask, SparseVector
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.tasks.finite_results import NON_FINITE_CODE, non_finite_error
from poolq.storage import read_embeddings
from poolq.worker.local_runner import run_job_locally

MODEL = "all-MiniLM-L6-v2"


class OomAboveRunner:
    """The real runner, except that a batch of more than ``limit`` tokens runs out of memory."""

    def __init__(self, inner, limit: int) -> None:
        self.inner, self.limit = inner, limit

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def forward(self, batch):
        if batch.num_tokens > self.limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate a step of {batch.num_tokens} tokens")
        return self.inner.forward(batch)


class NanForOneRecord(ConstantVectorEngine):
    """Constant vectors, except NaN for the record ``bad``."""

    def __init__(self, engine, bad: str) -> None:
        super().__init__(engine)
        self.bad = bad

    def run(self, requests, policy, **options):
        for result in super().run(requests, policy, **options):
            yield dataclasses.replace(result, data=np.full_like(result.data, np.nan)) if result.key == self.bad else result


def _outcome(ctx, spec: JobSpec):
    status = run_job_locally(ctx, spec)
    layout = JobHandle.bind(ctx, status.id).layout
    manifest = json.loads(ctx.store.get(layout.manifest))
    ids = [i for part in manifest["parts"] for i in read_embeddings(ctx.store.get(part["key"])).column("id").to_pylist()]
    errors = [json.loads(line) for line in ctx.store.get(layout.errors).decode().splitlines()]
    return status, ids, errors


def test_a_record_too_big_for_memory_fails_alone_and_the_rest_of_its_shard_is_embedded(local_ctx, minilm_engine):
    loaded = dataclasses.replace(minilm_engine.loaded, runner=OomAboveRunner(minilm_engine.runner, limit=120))
    local_ctx.engines.use(MODEL, PoolingEngine(loaded, EngineConfig(max_num_batched_tokens=512, dtype="float32")))
    docs = [{"id": f"doc-{i}", "text": "the committee met on tuesday to discuss the budget " * (1 + i % 3)}
            for i in range(10)]
    docs[5]["text"] = "a very long record about the budget and its many line items " * 20  # > 120 tokens alone
    spec = JobSpec.model_validate({"input": {"documents": docs}, "long_documents": {"mode": "truncate"}})
    status, ids, errors = _outcome(local_ctx, spec)
    assert status.status is JobState.PARTIALLY_SUCCEEDED
    assert [(e["id"], e["code"]) for e in errors] == [("doc-5", "out_of_memory")]
    assert sorted(ids) == sorted(d["id"] for d in docs if d["id"] != "doc-5")  # each once, the rest of its shard too
    assert (status.counts.completed, status.counts.failed) == (9, 1)


def test_a_non_finite_vector_is_its_records_error_not_a_row(local_ctx, minilm_engine):
    local_ctx.engines.use(MODEL, NanForOneRecord(minilm_engine, bad="doc-2"))
    docs = [{"id": f"doc-{i}", "text": f"document number {i}"} for i in range(6)]
    status, ids, errors = _outcome(local_ctx, JobSpec.model_validate({"input": {"documents": docs}}))
    assert [(e["id"], e["code"]) for e in errors] == [("doc-2", NON_FINITE_CODE)]
    assert "NaN or infinity" in errors[0]["message"]
    assert sorted(ids) == sorted(d["id"] for d in docs if d["id"] != "doc-2")
    assert (status.counts.completed, status.counts.failed) == (5, 1)


def _output(data) -> PoolingOutput:
    return PoolingOutput("k", data, num_tokens=3, truncated=False, processed_tokens=3)


def test_every_kind_of_value_a_task_writes_is_checked():
    ids = np.array([3, 9], dtype=np.int32)
    good_sparse = SparseVector(ids, np.array([0.5, 1.0], np.float32))
    bad_sparse = SparseVector(ids, np.array([np.inf, 1.0], np.float32))
    finite = [np.ones(4, np.float32), np.ones((3, 4), np.float32), good_sparse, (good_sparse, good_sparse),
              MultiOutput({PoolingTask.EMBED: np.ones(4, np.float32), PoolingTask.SPARSE_EMBED: good_sparse})]
    non_finite = [np.array([1.0, np.nan], np.float32), np.array([[1.0], [-np.inf]], np.float32), bad_sparse,
                  (good_sparse, bad_sparse), MultiOutput({PoolingTask.EMBED: np.ones(4, np.float32),
                                                          PoolingTask.SPARSE_EMBED: bad_sparse})]
    assert [non_finite_error(_output(data), "float16") for data in finite] == [None] * len(finite)
    errors = [non_finite_error(_output(data), "float16") for data in non_finite]
    assert all(e is not None and e.code == NON_FINITE_CODE and "compute dtype float16" in e.message for e in errors)
