"""The reconciler and model affinity: a shard waiting in its model's queue is left there while a live
worker holds the model (it will take it); once no live worker holds it, nobody may consume that
queue, and the shard is sent again, routed by the live holders (to the general queue when none)."""
import time

import pytest
from support.job_doubles import QueueRecordingEnqueuer

from poolq.jobs.coordination.enqueuer import GPU_QUEUE, model_queue
from poolq.jobs.coordination.work_units import shard_unit
from poolq.jobs.coordination.worker_model_stats import WorkerModelStats
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.submit import submit_job
from poolq.worker.reconciler import reconcile

MINILM = "all-MiniLM-L6-v2"



@pytest.fixture
def ctx(local_ctx):
    local_ctx.enqueuer = QueueRecordingEnqueuer()
    return local_ctx


def _hold(ctx, worker: str, model: str) -> None:
    ctx.workers.heartbeat(worker, 60.0)
    ctx.workers.report_models(worker, [WorkerModelStats(model, "float32", 1, 0, 0.1, 1000, loaded=True)], 60.0)


def _routed_to_the_holders(ctx) -> str:
    """A job whose two shards went to the model queue of the two live workers holding its model."""
    _hold(ctx, "w1", MINILM)
    _hold(ctx, "w2", MINILM)
    documents = [{"id": f"d{i}", "text": f"document {i}"} for i in range(8)]
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"documents": documents}})).id
    plan_job(JobHandle.bind(ctx, job_id))
    assert ctx.enqueuer.sent_to == [(job_id, 0, model_queue(MINILM)), (job_id, 1, model_queue(MINILM))]
    ctx.enqueuer.sent_to.clear()
    # sent long ago, never taken: both still wait in the model queue
    ctx.status.note_dispatch(job_id, [shard_unit(0), shard_unit(1)], time.time() - 2 * ctx.settings.reliability.requeue_after_s)
    ctx.enqueuer.depths = {model_queue(MINILM): 2, GPU_QUEUE: 0}
    return job_id


def test_shards_waiting_in_the_queue_of_a_live_holder_are_not_sent_again(ctx):
    _routed_to_the_holders(ctx)
    assert reconcile(ctx).resent == [] and ctx.enqueuer.sent_to == []


def test_shards_stranded_in_the_queue_of_dead_holders_are_sent_again_to_the_general_queue(ctx):
    job_id = _routed_to_the_holders(ctx)
    # When both holders die (their word runs out, or they stop) and a worker holding another model lives
    ctx.workers.forget("w1")
    ctx.workers.forget("w2")
    _hold(ctx, "w3", "another-model")
    # Then the reconciler sends both again, where the live worker takes them
    assert reconcile(ctx).resent == [f"{job_id}/{shard_unit(0)}", f"{job_id}/{shard_unit(1)}"]
    assert ctx.enqueuer.sent_to == [(job_id, 0, GPU_QUEUE), (job_id, 1, GPU_QUEUE)]
