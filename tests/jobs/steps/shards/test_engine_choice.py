"""One engine identity per job: claimed by its first shard, recorded in every commit and in the
manifest; a worker whose engine differs leaves the shard to another (EngineMismatch, retryable);
a dtype the job pins (or its first shard chose) is computed by any worker."""
from dataclasses import replace

import numpy as np
import pytest
from support.job_doubles import RecordingEnqueuer, run_task
from support.job_doubles import drain as _drain

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.engine_claim import claim_engine, claimed_engine, job_engine
from poolq.jobs.spec.engine_identity import EngineMismatch
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.failures import is_retryable
from poolq.jobs.steps.shards.shard_runner import run_shard
from poolq.jobs.steps.submit import submit_job
from poolq.storage import read_embeddings

MODEL = "all-MiniLM-L6-v2"


@pytest.fixture
def ctx(local_ctx):
    local_ctx.enqueuer = RecordingEnqueuer()
    return local_ctx


def _submit(ctx, n: int = 6, **fields) -> JobHandle:
    docs = [{"id": f"doc-{i}", "text": f"document number {i} about engines and their dtypes"} for i in range(n)]
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"documents": docs}, **fields})).id
    for task in [t for t in ctx.enqueuer.tasks if t[0] == "plan"]:
        ctx.enqueuer.tasks.remove(task)
        run_task(task, ctx)
    return JobHandle.bind(ctx, job_id)


def _vectors(ctx, manifest) -> np.ndarray:
    return np.concatenate([np.stack(read_embeddings(ctx.store.get(p.key)).column("embedding").to_numpy(zero_copy_only=False))
                           for p in manifest.parts])


def test_a_pinned_job_records_one_identity_in_its_claim_every_commit_and_the_manifest(ctx):
    job = _submit(ctx, compute_dtype="float32")  # shards of 4 and 2
    _drain(ctx)
    manifest = job.ledger.manifest()
    commits = job.ledger.commits()
    assert len(commits) == 2 and manifest.status.value == "succeeded"
    expected = ctx.engines.engine_identity(MODEL, "float32")
    assert manifest.engine == expected == claimed_engine(job.ledger)
    assert (expected.dtype, expected.device, expected.pooling) == ("float32", "cpu", "MEAN")
    assert expected.revision == ctx.registry.fingerprint(MODEL)
    assert {c.engine for c in commits.values()} == {expected.key} and manifest.engines == [expected.key]
    assert all(c.engine_identity == expected.model_dump() for c in commits.values())


def test_a_job_pinned_to_another_dtype_than_the_workers_is_computed_in_the_pin(ctx, minilm_engine):
    assert ctx.engines.dtype_for() == "float32"  # this worker's own (the suite pins float32)
    job = _submit(ctx, n=3, compute_dtype="bfloat16")  # bf16 on an AVX2 CPU is emulated: slow, same vectors
    _drain(ctx)
    manifest = job.ledger.manifest()
    assert manifest.engine.dtype == "bfloat16" and manifest.engines[0].endswith("/bfloat16")
    assert ctx.engines.get(MODEL, "bfloat16").config.dtype == "bfloat16"
    # the bf16 quality gate, per vector, against the fp32 engine
    texts = [f"document number {i} about engines and their dtypes" for i in range(3)]
    cosines = (_vectors(ctx, manifest) * minilm_engine.embed(texts)).sum(1)  # both L2-normalized
    assert cosines.min() >= 0.999 and not np.allclose(cosines, 1.0, atol=1e-7)  # bf16 rounding shows


def test_an_auto_job_computes_every_shard_in_the_dtype_its_first_shard_claimed(ctx):
    job = _submit(ctx, n=6)  # compute_dtype auto: this worker's float32, unless a shard claimed another
    claim_engine(job.ledger, ctx.engines.engine_identity(MODEL, "bfloat16"))  # a bf16 worker ran first
    _drain(ctx)
    manifest = job.ledger.manifest()
    assert manifest.engine.dtype == "bfloat16"
    assert {c.engine_identity["dtype"] for c in job.ledger.commits().values()} == {"bfloat16"}


def test_a_worker_whose_engine_differs_leaves_the_shard_to_another_naming_both(ctx):
    job = _submit(ctx, n=2)
    gpu_claim = ctx.engines.engine_identity(MODEL).model_copy(update={"device": "cuda"})
    claim_engine(job.ledger, gpu_claim)  # a GPU worker embedded the first shard
    with pytest.raises(EngineMismatch) as refused:
        run_shard(job, 0)
    assert is_retryable(refused.value)  # the retry sends it back to the queue, MAX_RETRIES times at most
    assert "device: cuda != cpu" in str(refused.value) and "allow_mixed_engines" in str(refused.value)
    assert job.ledger.shard_commit(0) is None and not ctx.leases.live_units(job.id)  # nothing committed, lease freed


def test_a_job_that_allows_mixing_embeds_with_any_engine_and_names_the_ones_it_used(ctx):
    job = _submit(ctx, n=6, allow_mixed_engines=True)
    gpu_claim = ctx.engines.engine_identity(MODEL).model_copy(update={"device": "cuda"})
    claim_engine(job.ledger, gpu_claim)  # as if a GPU worker had claimed it: mixing jobs do not look
    _drain(ctx)
    manifest = job.ledger.manifest()
    assert manifest.status.value == "succeeded"
    assert manifest.engine == ctx.engines.engine_identity(MODEL)  # the one identity its commits name
    commits = job.ledger.commits()
    commits[0] = replace(commits[0], engine_identity=gpu_claim.model_dump())  # had a GPU worker embedded shard 0
    assert job_engine(job.ledger, commits, mixed=True) is None  # several: none is the job's
