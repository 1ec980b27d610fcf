"""Redis going away mid-job: restarted (its AOF keeps the queues), or wiped (FLUSHALL)."""
import pytest

pytestmark = pytest.mark.integration

SLOW_S = 0.3


def test_redis_restarted_mid_job(deployment, documents, reference):
    # Given the API, beat and a worker embedding slowly
    deployment.start_api()
    worker = deployment.start_worker("w1", slow_s=SLOW_S, wait=False)
    beat = deployment.start_beat()
    deployment.wait_ready(worker)
    job_id = deployment.submit(documents)
    deployment.wait_shard_lease(job_id)
    deployment.wait_started_embedding()
    # When Redis stops (SIGTERM: it flushes its AOF) and starts again on the same port and data
    deployment.redis.stop()
    deployment.redis.start()
    deployment.redis.wait_ready()
    # Then every process reconnects and the job succeeds exactly, with nothing embedded twice
    deployment.check_outcome(job_id, documents, reference)
    assert worker.alive() and beat.exit_code in (None, 0)
    assert set(deployment.model_runs_per_document().values()) == {1}


def test_redis_wiped_mid_job(deployment, documents, reference):
    # Given the API, beat (which runs the reconciler) and a worker embedding slowly
    deployment.start_api()
    worker = deployment.start_worker("w1", slow_s=SLOW_S)
    beat = deployment.start_beat()
    job_id = deployment.submit(documents, idempotency_key="wiped-case")
    deployment.wait_shard_lease(job_id)
    deployment.wait_started_embedding()
    # When Redis loses everything: queued tasks, the job's status, leases, dispatch times
    deployment.redis_client.flushall()
    # Then the API serves the status rebuilt from the ledger; beat takes its lock again and
    # restores the reconciler's entry, which re-sends what is missing; the job succeeds exactly
    # and every process stays up
    assert deployment.status(job_id)["status"] == "running"
    assert deployment.submit(documents, idempotency_key="wiped-case") == job_id  # a client's retry: same job
    deployment.check_outcome(job_id, documents, reference)
    assert worker.alive() and beat.exit_code in (None, 0)  # 0: check_outcome stopped it
    assert "lock held and static entries restored" in beat.log()
