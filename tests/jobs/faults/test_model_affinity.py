"""Model affinity on real workers: a shard runs on a worker that holds its model loaded; a worker that
holds one model at a time still runs jobs of two to the end, every record once; a shard routed to a
holder that died is sent again and runs elsewhere, every record once."""
import json
from collections import Counter

import numpy as np
import pytest
from support.hub_cache import tiny_st_bert

from poolq.jobs.coordination.enqueuer import GPU_QUEUE, model_queue
from poolq.jobs.coordination.shard_routing import AFFINITY

pytestmark = pytest.mark.integration

MINILM = "all-MiniLM-L6-v2"
TINY = "tiny-st"  # a tiny random BERT in the sentence-transformers layout, registered through POOLQ_MODELS


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return tiny_st_bert(tmp_path_factory.mktemp("tiny-st") / "model", seed=7)


@pytest.fixture(scope="module")
def tiny_reference(tiny_model, sample_documents):
    """Each sample document's vector from a clean engine run of the tiny model (truncating, as the jobs)."""
    from poolq.engine import PoolingEngine, PoolingRequest, PoolingTask
    from poolq.jobs.model.job_spec import LongDocuments
    from poolq.jobs.settings import Settings

    engine = PoolingEngine.from_pretrained(str(tiny_model), config=Settings().engine_config(), dtype="float32")
    requests = (PoolingRequest(key=d["id"], text=d["text"], task=PoolingTask.EMBED) for d in sample_documents)
    return {result.key: np.asarray(result.data, dtype=np.float32)
            for result in engine.run(requests, LongDocuments(mode="truncate").policy())}


@pytest.fixture
def fleet(deployment, tiny_model):
    """The deployment, its settings for a worker (the tiny model registered), and a submitter that
    knows the tiny model too."""
    models = {TINY: str(tiny_model)}
    settings = deployment.settings.model_copy(update={"models": models})

    def worker_settings(**values):
        return {"models": json.dumps(models), **values}

    def submit(model: str, documents: list[dict]) -> str:
        from poolq.jobs.model.job_spec import JobSpec
        from poolq.jobs.steps.submit import submit_job
        from poolq.jobs.worker.celery_app import create_celery_app
        from poolq.jobs.worker.tasks import build_worker_context

        ctx = build_worker_context(create_celery_app(settings), settings)
        return submit_job(JobSpec.model_validate(deployment.spec_for(documents, {"model": model})), ctx).id

    return deployment, worker_settings, submit


def _holding(deployment, holders: dict[str, int], timeout: float = 60) -> None:
    deployment.wait(lambda: deployment.ctx.workers.loaded_models() == holders, timeout, f"the workers to hold {holders}")


def _ran_on(deployment, workers) -> dict[tuple[str, int], list[str]]:
    """(job, shard) -> the workers its deliveries ran on (each worker has one pool child)."""
    names = {pid: worker.name for worker in workers for pid in worker.children()}
    ran: dict[tuple[str, int], list[str]] = {}
    for delivery in deployment.events("deliveries"):
        ran.setdefault((delivery["job_id"], delivery["shard"]), []).append(names.get(delivery["pid"], "?"))
    return ran


def _queues_empty(deployment, *models: str) -> None:
    client = deployment.redis_client
    deployment.wait(lambda: not any(client.llen(model_queue(model)) for model in models), 30, "empty model queues")


@pytest.mark.settings(worker_heartbeat_s=1, shard_max_documents=2)
def test_shards_run_on_the_worker_that_holds_their_model(fleet, documents, reference, tiny_reference):
    deployment, worker_settings, submit = fleet
    # Given a compute worker warm with MiniLM, running the first shard of a MiniLM job
    minilm_worker = deployment.start_worker("minilm", settings=worker_settings(warm_models=MINILM))
    _holding(deployment, {MINILM: 1})
    jobs = {submit(MINILM, documents): MINILM}
    deployment.wait_shard_lease(next(iter(jobs)))
    # When a second worker, warm with the tiny model, joins, and a tiny-model job is submitted: the
    # two jobs' shards interleave (6 shards each; fair share hands out one per worker at a time)
    tiny_worker = deployment.start_worker("tiny", settings=worker_settings(warm_models=TINY))
    _holding(deployment, {MINILM: 1, TINY: 1})
    jobs[submit(TINY, documents)] = TINY
    # Then both succeed, every record once
    for job_id, model in jobs.items():
        deployment.check_outcome(job_id, documents, reference if model == MINILM else tiny_reference)
    _queues_empty(deployment, MINILM, TINY)
    # and each shard ran on the worker warm with its model (each delivered once: a clean run)
    ran = _ran_on(deployment, [minilm_worker, tiny_worker])
    assert sorted(ran) == sorted((job_id, shard) for job_id in jobs for shard in range(6)), ran
    home = {MINILM: "minilm", TINY: "tiny"}
    placed = Counter((jobs[job_id], "home" if workers == [home[jobs[job_id]]] else "away")
                     for (job_id, _), workers in ran.items())
    routed = deployment.ctx.metrics.totals().routed
    print("PLACED", dict(placed), routed)
    assert placed[(MINILM, "away")] + placed[(TINY, "away")] <= 1, (placed, routed)
    assert routed.get(AFFINITY, 0) >= 11, routed


@pytest.mark.settings(worker_heartbeat_s=1)
def test_a_worker_holding_one_model_at_a_time_runs_jobs_of_two_models_to_the_end(fleet, documents, reference,
                                                                               tiny_reference):
    deployment, worker_settings, submit = fleet
    # Given one compute worker whose model memory holds one model at a time, warm with MiniLM
    worker = deployment.start_worker("one-model", settings=worker_settings(warm_models=MINILM, worker_model_memory=1))
    _holding(deployment, {MINILM: 1})
    # When a MiniLM job and a tiny-model job run together (fair share alternates their shards)
    jobs = {submit(MINILM, documents): reference, submit(TINY, documents): tiny_reference}
    # Then both succeed with every record exactly once
    for job_id, expected in jobs.items():
        deployment.check_outcome(job_id, documents, expected)
    _queues_empty(deployment, MINILM, TINY)
    # and the worker loaded the models again as they alternated, each load evicting the other
    totals = deployment.ctx.workers.model_totals()
    loads = {model: totals[model].loads for model in (MINILM, TINY)}
    assert loads[MINILM] >= 2 and loads[TINY] >= 1, totals
    assert totals[MINILM].evictions + totals[TINY].evictions >= loads[MINILM] + loads[TINY] - 2, totals
    # and it consumed the tiny model's queue once it held it (a remote-control add_consumer of its own)
    assert f"consumes {model_queue(TINY)}" in worker.log()


def test_a_shard_routed_to_a_holder_that_died_is_sent_again_and_runs_elsewhere(fleet, documents, reference):
    deployment, worker_settings, submit = fleet
    # Given one worker holding MiniLM, embedding slowly, and the reconciler
    holder = deployment.start_worker("holder", slow_s=0.5, settings=worker_settings(warm_models=MINILM))
    _holding(deployment, {MINILM: 1})
    deployment.run_reconciler()
    job_id = submit(MINILM, documents[:6])
    # When it dies (-9) mid-shard: the shard's lease lapses and the reconciler sends it again while
    # the dead worker's word still counts it a holder, so to MiniLM's queue, where nobody takes it
    deployment.wait_shard_lease(job_id)
    deployment.wait_started_embedding()
    deployment.kill_group(holder)
    client = deployment.redis_client
    deployment.wait(lambda: client.llen(model_queue(MINILM)) >= 1, 30, "the re-sent shard to wait in MiniLM's queue")
    assert client.llen(GPU_QUEUE) == 0
    # and a worker holding another model starts
    deployment.start_worker("other", settings=worker_settings(warm_models=TINY))
    # Then once the dead worker's word runs out, the shard is sent again to the general queue, the
    # other worker runs it (loading MiniLM), and the job succeeds with every record exactly once
    deployment.check_outcome(job_id, documents[:6], reference)
    # and the stranded message, taken by the worker that holds MiniLM now, was a harmless duplicate
    _queues_empty(deployment, MINILM)
