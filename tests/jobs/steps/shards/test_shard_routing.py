"""Model affinity: a shard goes to its model's queue while a live worker holding the model can take
it soon (fewer tasks wait there than there are holders), else to the general queue; fair share
still decides which shards go out, routing only where; each round's routes are counted."""
import time
import uuid

import pytest
import redis
from support.job_doubles import QueueRecordingEnqueuer

from poolq.jobs.coordination.enqueuer import GPU_QUEUE, MODEL_QUEUE_PREFIX, model_queue
from poolq.jobs.coordination.worker_model_stats import WorkerModelStats
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.observability.job_metrics import RedisJobMetrics
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.shards.shard_routing import AFFINITY, GENERAL, ShardRouter, affinity_queue, shard_queue
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context

MINILM = "all-MiniLM-L6-v2"



@pytest.fixture
def ctx(tmp_path):
    """An in-process context that holds no model itself (as the control worker that plans)."""
    ctx = local_context(tmp_path / "out", Settings(shard_max_documents=4))
    ctx.enqueuer = QueueRecordingEnqueuer()
    return ctx


def hold(ctx, worker: str, *models: str, alive_s: float = 60.0) -> None:
    """``worker`` is a live compute worker (for ``alive_s`` more seconds) holding ``models``."""
    ctx.workers.heartbeat(worker, alive_s, now=time.time())
    ctx.workers.report_models(worker, [WorkerModelStats(model, "float32", 1, 0, 0.1, 1000, loaded=True) for model in models],
                              max(alive_s, 1.0))


def test_a_model_queue_is_named_by_a_digest_of_the_model():
    queue = model_queue("org/name@0123456789abcdef0123456789abcdef01234567")
    assert queue.startswith(MODEL_QUEUE_PREFIX) and len(queue) == len(MODEL_QUEUE_PREFIX) + 12
    assert queue == model_queue("org/name@0123456789abcdef0123456789abcdef01234567") != model_queue("org/name@other")


@pytest.mark.parametrize(("holders", "waiting", "routed"), [
    (0, 0, None),  # nobody holds it: the general queue, where any worker takes (and loads) it
    (1, 0, "model"),  # its holder takes it next
    (1, 1, None),  # the holder already has one waiting: the overflow goes where any worker takes it
    (3, 2, "model"),
    (3, 3, None),
])
def test_the_model_queue_while_fewer_tasks_wait_there_than_workers_hold_the_model(holders, waiting, routed):
    expected = model_queue(MINILM) if routed else None
    assert affinity_queue(MINILM, holders, waiting) == expected


def test_a_shard_goes_to_its_model_queue_only_while_a_live_worker_holds_the_model(ctx):
    assert shard_queue(ctx, MINILM) == GPU_QUEUE  # no worker at all
    hold(ctx, "w-other", "another-model")
    assert shard_queue(ctx, MINILM) == GPU_QUEUE  # a live worker, holding another model
    hold(ctx, "w-dead", MINILM, alive_s=-1.0)  # its word ran out: it is dead, whatever it last said
    assert shard_queue(ctx, MINILM) == GPU_QUEUE
    hold(ctx, "w-live", MINILM)
    assert shard_queue(ctx, MINILM) == model_queue(MINILM)
    assert shard_queue(ctx, None) == GPU_QUEUE  # a job whose model is not known here


def test_a_backlog_in_the_model_queue_as_large_as_its_holders_sends_shards_to_the_general_queue(ctx):
    hold(ctx, "w1", MINILM)
    hold(ctx, "w2", MINILM)
    ctx.enqueuer.depths = {model_queue(MINILM): 2}
    assert shard_queue(ctx, MINILM) == GPU_QUEUE
    ctx.enqueuer.depths = {model_queue(MINILM): 1}
    # One round counts its own sends on top of the depth it read: one more fits, the next overflows
    router = ShardRouter(ctx)
    assert [router.queue(MINILM) for _ in range(3)] == [model_queue(MINILM), GPU_QUEUE, GPU_QUEUE]
    assert router.routed == {AFFINITY: 1, GENERAL: 2}


def test_a_holder_sending_at_the_end_of_its_task_counts_the_task_it_takes_next(ctx, minilm_engine):
    # Given this process holds MiniLM (a compute worker committing a shard: it takes a task next), and
    # is MiniLM's only holder, with one task already waiting for it
    ctx.engines.use(MINILM, minilm_engine)
    hold(ctx, "this-worker", MINILM)
    ctx.enqueuer.depths = {model_queue(MINILM): 1}
    # Then one more task waits for it (the waiting one is as good as taken), and only one
    router = ShardRouter(ctx)
    assert [router.queue(MINILM) for _ in range(3)] == [model_queue(MINILM), GPU_QUEUE, GPU_QUEUE]
    # and a model it does not hold gets no such allowance
    hold(ctx, "another-worker", "another-model")
    ctx.enqueuer.depths = {model_queue("another-model"): 1}
    assert ShardRouter(ctx).queue("another-model") == GPU_QUEUE


def test_a_routing_read_that_fails_sends_the_shard_to_the_general_queue(ctx, caplog):
    hold(ctx, "w1", MINILM)

    def broker_down(queue):
        raise redis.ConnectionError("broker down")

    ctx.enqueuer.waiting = broker_down
    assert shard_queue(ctx, MINILM) == GPU_QUEUE
    assert "reading the depth of gpu.model." in caplog.text


def _planned(ctx, shards: int) -> str:
    documents = [{"id": f"d{i}", "text": f"document {i}"} for i in range(4 * shards)]
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"documents": documents}})).id
    ctx.enqueuer.take()
    plan_job(JobHandle.bind(ctx, job_id))
    return job_id


def test_dispatch_sends_the_shards_fair_share_picked_to_their_model_queue_then_the_overflow_to_the_general_one(ctx):
    # Given three live workers, two of them holding the job's model (shards_per_worker 1: 3 slots)
    hold(ctx, "w1", MINILM)
    hold(ctx, "w2", MINILM, "another-model")
    hold(ctx, "w3", "another-model")
    # When a job of 5 shards is planned
    job_id = _planned(ctx, shards=5)
    # Then fair share hands out its first three shards, as without routing: two wait for the two
    # holders, the third goes where any worker takes it
    assert ctx.enqueuer.take() == [("shard", job_id, shard) for shard in range(3)]
    assert ctx.enqueuer.sent_to == [(job_id, 0, model_queue(MINILM)), (job_id, 1, model_queue(MINILM)), (job_id, 2, GPU_QUEUE)]
    # and the routes are counted
    assert ctx.metrics.totals().routed == {AFFINITY: 2, GENERAL: 1}


def test_without_holders_every_shard_goes_to_the_general_queue_and_the_job_model_is_not_read(ctx, monkeypatch):
    reads: list[str] = []
    real_field = ctx.status.field

    def field(job_id, name):
        reads.append(name)
        return real_field(job_id, name)

    monkeypatch.setattr(ctx.status, "field", field)
    job_id = _planned(ctx, shards=3)
    assert ctx.enqueuer.sent_to == [(job_id, shard, GPU_QUEUE) for shard in range(3)]
    assert "model" not in reads
    assert ctx.metrics.totals().routed == {GENERAL: 3}


@pytest.mark.integration
def test_routes_are_counted_in_redis(redis_url):
    metrics = RedisJobMetrics(redis.Redis.from_url(redis_url), prefix=f"poolq:test-routing:{uuid.uuid4().hex}")
    metrics.shards_routed({AFFINITY: 2, GENERAL: 1})
    metrics.shards_routed({AFFINITY: 1, GENERAL: 0})
    assert metrics.totals().routed == {AFFINITY: 3, GENERAL: 1}


@pytest.mark.integration
def test_celery_sends_a_routed_shard_to_the_model_queue(redis_url):
    from poolq.jobs.coordination.enqueuer import CeleryEnqueuer
    from poolq.jobs.settings import Settings
    from poolq.worker.celery_app import create_celery_app

    enqueuer = CeleryEnqueuer(create_celery_app(Settings(redis_url=redis_url)))
    queue = model_queue(f"model-{uuid.uuid4().hex}")
    assert enqueuer.waiting(queue) == 0
    enqueuer.run_shard_on("j" * 32, 0, queue)
    assert (enqueuer.waiting(queue), redis.Redis.from_url(redis_url).llen(queue)) == (1, 1)
