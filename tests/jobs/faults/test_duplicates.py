"""The same task delivered more than once: a shard outliving the broker's visibility timeout,
and messages published twice. A duplicate delivery does no model work and counts nothing twice."""
import pytest

from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE, PLAN_TASK, SHARD_TASK

pytestmark = pytest.mark.integration


@pytest.mark.settings(task_soft_time_limit_s=20, task_time_limit_s=25, visibility_timeout_s=60)
def test_a_shard_outliving_the_visibility_timeout_is_delivered_again_and_does_no_work(deployment, documents, reference):
    # Given two workers whose broker redelivers a task unacked for 2 s, and a one-shard job whose
    # shard takes ~6 s (the broker's visibility timeout is what the fault overrides: the
    # settings' Celery time limits, which would otherwise stop such a shard, stay consistent)
    documents = documents[:3]
    workers = [deployment.start_worker(name, wait=False, slow_s=2, broker_visibility_s=2) for name in ("w1", "w2")]
    deployment.wait_ready(*workers)
    # When the job runs
    job_id = deployment.submit(documents)
    # Then the shard's task is delivered again while the first attempt still runs...
    deployment.wait(lambda: len([d for d in deployment.events("deliveries") if d["shard"] == 0]) >= 2, 30,
                    "a second delivery of shard 0")
    deployment.check_outcome(job_id, documents, reference)
    deliveries = [d for d in deployment.events("deliveries") if d["shard"] == 0]
    results = [r for r in deployment.events("delivery_results") if r["shard"] == 0]
    finished_at = min(r["t"] for r in results if r["attempt"])  # the running attempt returned its commit
    leased_out = [r for r in results if r["attempt"] is None]  # deliveries that found the shard leased
    assert len({d["pid"] for d in deliveries}) == 2, deliveries  # both workers' pool children had it
    assert leased_out and leased_out[0]["t"] < finished_at, results  # one came while the attempt still ran
    # ...and that delivery did no model work: each document went through the model once
    assert deployment.model_runs_per_document() == {d["id"]: 1 for d in documents}


def test_messages_published_twice_change_nothing(deployment, documents, reference):
    # Given a worker
    deployment.start_worker("w1", slow_s=0.05)
    # When a job's plan task and every shard task are published twice more, while it runs
    job_id = deployment.submit(documents)
    for _ in range(2):
        deployment.send_task(PLAN_TASK, [job_id], CONTROL_QUEUE)
    for shard in range(4):
        for _ in range(2):
            deployment.send_task(SHARD_TASK, [job_id, shard], GPU_QUEUE)
    deployment.wait_state(job_id, "succeeded")
    # and again after it finished
    for shard in range(4):
        deployment.send_task(SHARD_TASK, [job_id, shard], GPU_QUEUE)
    # Then the output is exact, each document went through the model once, and the counts
    # (checked again once every message was consumed) are the manifest's
    deployment.check_outcome(job_id, documents, reference)
    assert deployment.model_runs_per_document() == {d["id"]: 1 for d in documents}
    assert len(deployment.events("deliveries")) >= 4 * 4
