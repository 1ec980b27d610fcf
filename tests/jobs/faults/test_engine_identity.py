"""A fleet of unlike workers (one computes in float32 by default, one in bfloat16): a job's rows
come from one engine identity, recorded in every commit and the manifest; a shard claimed by an
engine no worker here has is left to others a bounded number of times, then fails, saying why."""
import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.engine_claim import claim_engine
from poolq.jobs.spec.engine_identity import EngineIdentity

pytestmark = pytest.mark.integration
MODEL = "all-MiniLM-L6-v2"


def _commit_identities(deployment, job_id) -> list[dict]:
    return [commit.engine_identity for commit in JobHandle.bind(deployment.ctx, job_id).ledger.commits().values()]


def test_a_pinned_job_on_unlike_workers_has_one_engine_identity(deployment, documents, reference):
    # Given two workers, one computing in float32 by default and one in bfloat16
    workers = [deployment.start_worker("fp32", wait=False, slow_s=0.2, settings={"compute_dtype": "float32"}),
               deployment.start_worker("bf16", wait=False, slow_s=0.2, settings={"compute_dtype": "bfloat16"})]
    deployment.wait_ready(*workers)
    # When a job pinned to float32 runs on both (4 shards, two out at once)
    deployment.job_fields = {"compute_dtype": "float32"}
    job_id = deployment.submit(documents)
    # Then its vectors are float32's, exactly (check_outcome: a clean fp32 run, 1e-6), from both workers
    manifest = deployment.check_outcome(job_id, documents, reference)
    assert len({delivery["pid"] for delivery in deployment.events("deliveries")}) == 2
    # and every commit and the manifest name one identity
    identities = _commit_identities(deployment, job_id)
    assert len(identities) == 4 and all(identity == manifest["engine"] for identity in identities)
    assert (manifest["engine"]["model"], manifest["engine"]["dtype"], manifest["engine"]["device"]) == (
        MODEL, "float32", "cpu")
    assert manifest["engines"] == [f"{manifest['engine']['revision']}/float32"]


@pytest.mark.settings(task_soft_time_limit_s=60, task_time_limit_s=70, visibility_timeout_s=150)
def test_an_auto_job_keeps_the_dtype_its_first_shard_claimed_on_every_worker(deployment, documents, reference):
    # Given a bfloat16 worker that runs an unpinned job's first shard (slowly: 2 s a document)
    documents = documents[:6]  # 2 shards
    bf16 = deployment.start_worker("bf16", slow_s=2, settings={"compute_dtype": "bfloat16"})
    job_id = deployment.submit(documents)
    job = JobHandle.bind(deployment.ctx, job_id)
    deployment.wait(lambda: deployment.ctx.store.exists(job.layout.engine_claim), 60, "the job's engine claim")
    # When a float32 worker joins while it runs, and takes the other shard
    fp32 = deployment.start_worker("fp32", settings={"compute_dtype": "float32"})
    deployment.wait_state(job_id, "succeeded", timeout=120)
    # Then both shards were computed in bfloat16, whichever worker ran them
    manifest = json.loads(deployment.ctx.store.get(job.layout.manifest))
    assert manifest["engine"]["dtype"] == "bfloat16"
    assert [identity["dtype"] for identity in _commit_identities(deployment, job_id)] == ["bfloat16", "bfloat16"]
    ran = {run["pid"] for run in deployment.events("model_runs")}
    assert ran & set(bf16.children()) and ran & set(fp32.children()), (ran, bf16.children(), fp32.children())
    # and each vector passes the bf16 gate against float32's
    ids, vectors = [], []
    for part in manifest["parts"]:
        table = pq.read_table(io.BytesIO(deployment.ctx.store.get(part["key"])))
        ids += table.column("id").to_pylist()
        vectors += [np.asarray(v, dtype=np.float32) for v in table.column("embedding").to_pylist()]
    cosines = [float(v @ reference[i]) for i, v in zip(ids, vectors)]
    assert len(cosines) == len(documents) and min(cosines) >= 0.999


@pytest.mark.settings(task_retry_backoff_s=0.05, task_retry_backoff_max_s=0.2)
def test_a_shard_no_worker_here_can_make_is_retried_a_bounded_number_of_times_then_fails_saying_why(
        deployment, documents, reference):
    # Given a job whose rows a GPU worker claimed (its engine identity names device cuda), and CPU workers only
    documents = documents[:3]
    job_id = deployment.submit(documents)
    ctx = deployment.ctx
    ours = ctx.engines.engine_identity(MODEL)
    claim_engine(JobHandle.bind(ctx, job_id).ledger, ours.model_copy(update={"device": "cuda"}))
    deployment.start_worker("cpu")
    # Then the shard goes back to the queue MAX_RETRIES times, then fails, every record saying why
    manifest = deployment.check_outcome(job_id, documents, reference, state="failed",
                                        failed={d["id"]: "shard_failed" for d in documents})
    assert "EngineMismatch" in manifest["error"] and "device: cuda != cpu" in manifest["error"]
    assert EngineIdentity.model_validate(manifest["engine"]).device == "cuda"  # the job's identity, as claimed
    assert len([d for d in deployment.events("deliveries") if d["shard"] == 0]) == 6  # 1 + MAX_RETRIES
