"""Workers that die: a pool child killed mid-shard, a whole worker killed, a crash between the
commit and the ack, a poison shard that kills every child that embeds it, a warm shutdown."""
import os
import signal

import pytest

from poolq.jobs import JobHandle

pytestmark = pytest.mark.integration

SLOW_S = 0.3  # per document: a shard of 3 documents takes about a second


def shard_of(unit: str) -> int:
    return int(unit.split("-")[1])


def shard_ids(documents: list[dict], shard: int, per_shard: int = 3) -> set[str]:
    return {d["id"] for d in documents[shard * per_shard:(shard + 1) * per_shard]}


@pytest.mark.parametrize("task", ["embed", "sparse_embed", "score"])
def test_kill_9_of_the_pool_child_mid_shard(deployment, documents, reference, sparse_reference, score_reference, task):
    # Given the API, beat (the reconciler) and one worker whose shards take a while (a dense, sparse or score job)
    if task == "sparse_embed":
        deployment.job_fields = {"model": "splade-tiny", "task": "sparse_embed"}
        reference = sparse_reference
    if task == "score":
        deployment.job_fields = {"task": "score", "score_mode": "cosine"}
        documents = [{**d, "query": score_reference.query} for d in documents]
        reference = score_reference
    deployment.start_api()
    worker = deployment.start_worker("w1", slow_s=SLOW_S)
    deployment.start_beat()
    job_id = deployment.submit(documents)
    # When the pool child is killed (-9) while it embeds a shard
    unit = deployment.wait_shard_lease(job_id)
    deployment.wait_started_embedding()
    [child] = worker.children()
    os.kill(child, signal.SIGKILL)
    # Then the worker replaces its child, the shard runs again once its lease lapses, the job succeeds exactly
    deployment.check_outcome(job_id, documents, reference)
    assert worker.alive() and child not in worker.children()
    runs = deployment.model_runs_per_document()
    killed = shard_ids(documents, shard_of(unit))
    assert {i for i, n in runs.items() if n == 2} == killed and set(runs) == {d["id"] for d in documents}


def test_kill_9_of_the_whole_worker_then_another_worker_finishes(deployment, documents, reference):
    # Given beat and one worker, embedding slowly
    first = deployment.start_worker("w1", slow_s=SLOW_S)
    deployment.start_beat()
    job_id = deployment.submit(documents)
    unit = deployment.wait_shard_lease(job_id)
    deployment.wait_started_embedding()
    # When the worker and its pool are killed (-9) mid-shard, and another worker starts
    deployment.kill_group(first)
    deployment.start_worker("w2")
    # Then the job succeeds exactly; the orphaned message comes back after its visibility
    # timeout and finds its shard committed (check_outcome waits until nothing is unacked)
    deployment.check_outcome(job_id, documents, reference)
    runs = deployment.model_runs_per_document()
    assert {i for i, n in runs.items() if n == 2} == shard_ids(documents, shard_of(unit))
    assert set(runs) == {d["id"] for d in documents} and max(runs.values()) == 2


def test_crash_after_the_commit_before_the_ack(deployment, documents, reference, tmp_path):
    # Given a worker that exits right after the first shard commit marker it writes
    marker = tmp_path / "exited-after-commit"
    worker = deployment.start_worker("w1", exit_after_commit=marker)
    # When a job runs (its first committed shard's process dies before counting and acking)
    job_id = deployment.submit(documents)
    # Then the redelivered task finds the commit and counts it, with no model work; the job is exact
    manifest = deployment.check_outcome(job_id, documents, reference)
    [crash] = deployment.events("exit_after_commit")
    committed = {part["shard"]: part["key"] for part in manifest["parts"]}
    assert crash["attempt"] in committed[crash["shard"]]  # the crashed attempt's part is the one listed
    assert set(deployment.model_runs_per_document().values()) == {1}
    assert worker.alive() and marker.exists()


@pytest.mark.settings(max_shard_crashes=2)
def test_a_poison_shard_fails_after_max_shard_crashes(deployment, documents, reference):
    # Given a document that kills whatever process embeds it, in shard 1
    documents = [dict(d) for d in documents]
    documents[4]["text"] += " POISON-PILL"
    deployment.start_worker("w1", poison_marker="POISON-PILL")
    deployment.start_beat()
    # When the job runs
    job_id = deployment.submit(documents)
    # Then shard 1 crashes its child exactly max_shard_crashes times, is committed as failed, and
    # the job partially succeeds with exactly that shard's records as errors
    poisoned = shard_ids(documents, 1)
    manifest = deployment.check_outcome(job_id, documents, reference, state="partially_succeeded",
                                        failed={i: "shard_failed" for i in poisoned})
    assert len(deployment.events("poisoned")) == 2
    assert manifest["shards"]["gave_up"] == 1
    errors = deployment.ctx.store.get(JobHandle.bind(deployment.ctx, job_id).layout.errors).decode()
    assert "abandoned after 2 attempts" in errors


def test_sigterm_mid_shard_finishes_the_shard_and_exits_0(deployment, documents, reference):
    # Given one worker embedding slowly
    first = deployment.start_worker("w1", slow_s=SLOW_S)
    job_id = deployment.submit(documents)
    unit = deployment.wait_shard_lease(job_id)
    deployment.wait_started_embedding()
    # When it gets SIGTERM mid-shard
    os.kill(first.pid, signal.SIGTERM)
    # Then it finishes and commits that shard, then exits 0 (warm shutdown)
    assert first.wait_exit(30) == 0, first.log()[-3000:]
    assert JobHandle.bind(deployment.ctx, job_id).ledger.shard_commit(shard_of(unit)) is not None
    # and another worker finishes the rest, with nothing embedded twice
    deployment.start_worker("w2")
    deployment.check_outcome(job_id, documents, reference)
    assert set(deployment.model_runs_per_document().values()) == {1}


def test_kill_9_of_a_planner_mid_plan_then_another_worker_plans_it_once(deployment, documents, reference):
    # Given beat and one worker whose planning is slow
    first = deployment.start_worker("w1", slow_plan_s=0.3)
    deployment.start_beat()
    job_id = deployment.submit(documents)
    deployment.wait(lambda: deployment.events("planning"), 60, "planning to start", 0.05)
    # When the worker is killed (-9) while it plans (no plan written yet), and another worker starts
    deployment.kill_group(first)
    assert JobHandle.bind(deployment.ctx, job_id).ledger.plan() is None
    deployment.start_worker("w2")
    # Then the other worker plans it (once the dead planner's lease lapses) and the job succeeds
    # exactly: every record once, in a part or in the error file
    deployment.check_outcome(job_id, documents, reference)
    assert set(deployment.model_runs_per_document()) == {d["id"] for d in documents}
