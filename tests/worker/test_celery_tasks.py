"""The Celery edge: a retry is noted as a send (no reconciler duplicate), queue depths are real."""
from types import SimpleNamespace

import pytest
import redis
from celery import Celery
from support.job_doubles import bindable_context

from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE, SHARD_TASK, CeleryEnqueuer
from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.coordination.work_units import shard_unit
from poolq.jobs.settings import Settings
from poolq.worker import celery_tasks as tasks_module
from poolq.worker.celery_app import create_celery_app

JOB = "d" * 32


def test_a_retried_shard_is_noted_as_sent_again_so_the_reconciler_leaves_it_alone(monkeypatch):
    # Given a shard task whose first attempt meets a retryable storage outage
    status = InMemoryJobStatusStore()
    status.note_dispatch(JOB, [shard_unit(2)], 1.0)  # first sent long ago
    attempts = []

    def flaky_run_shard(job, shard):
        attempts.append(status.dispatches(job.id)[shard_unit(shard)])
        if len(attempts) == 1:
            raise ConnectionError("S3 endpoint restarting")

    app = Celery("poolq-test", broker="memory://")
    monkeypatch.setattr(tasks_module, "build_worker_context", lambda app, settings, *_: bindable_context(status=status))
    monkeypatch.setattr(tasks_module, "run_shard", flaky_run_shard)
    tasks_module.register_tasks(app, Settings(task_retry_backoff_s=0.01, task_retry_backoff_max_s=0.01))
    # When it runs (eagerly: the retry runs at once)
    app.tasks[SHARD_TASK].apply(args=[JOB, 2])
    # Then the retry was noted as a send before it ran, so a reconciler pass during its countdown
    # sees a unit sent just now, not one consumed and dead
    assert len(attempts) == 2 and attempts[0] == 1.0 and attempts[1] > 1.0


@pytest.mark.integration
def test_celery_enqueuer_reports_each_queues_waiting_messages(redis_url):
    # Given a broker database of its own with 3 shard tasks sent and nothing consuming them
    url = redis_url.rsplit("/", 1)[0] + "/7"
    redis.Redis.from_url(url).flushdb()
    enqueuer = CeleryEnqueuer(create_celery_app(Settings(redis_url=url)))
    try:
        for shard in range(3):
            enqueuer.run_shard(JOB, shard)
        # Then the GPU queue holds 3, and the control queue (never used: no such list) 0
        assert enqueuer.waiting(GPU_QUEUE) == 3
        assert enqueuer.waiting(CONTROL_QUEUE) == 0
    finally:
        redis.Redis.from_url(url).flushdb()


def test_the_plan_task_has_its_own_time_limits_not_a_shards():
    from poolq.jobs.coordination.enqueuer import PLAN_TASK

    app = Celery("poolq-test", broker="memory://")
    settings = Settings(plan_soft_time_limit_s=7200, plan_time_limit_s=7500)
    tasks_module.register_tasks(app, settings)
    plan, shard = app.tasks[PLAN_TASK], app.tasks[SHARD_TASK]
    assert (plan.soft_time_limit, plan.time_limit) == (7200, 7500)
    assert shard.soft_time_limit is None  # shards take the app's task_soft_time_limit


def test_a_batch_step_that_fails_for_good_is_handed_to_the_batch_give_up(monkeypatch):
    from poolq.jobs.coordination.enqueuer import BATCH_TASK

    given_up = []

    def failing_advance(ctx, tenant, batch_id):
        raise ValueError("a bug")

    app = Celery("poolq-test", broker="memory://")
    monkeypatch.setattr(tasks_module, "build_worker_context", lambda app, settings, *_: SimpleNamespace())
    monkeypatch.setattr(tasks_module, "advance_batch", failing_advance)
    monkeypatch.setattr(tasks_module, "give_up_batch",
                        lambda ctx, tenant, batch_id, exc: given_up.append((tenant, batch_id, str(exc))))
    tasks_module.register_tasks(app, Settings())
    app.tasks[BATCH_TASK].apply(args=["acme", "batch_" + "0" * 32])
    assert given_up == [("acme", "batch_" + "0" * 32, "a bug")]
