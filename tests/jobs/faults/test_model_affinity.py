"""Model affinity on real workers: a shard runs on a worker that holds its model loaded; a worker that
holds one model at a time still runs jobs of two to the end, every record once; a shard routed to a
holder that died is sent again and runs elsewhere, every record once."""
import json
from collections import Counter

import numpy as np
import pytest
from support.hub_cache import tiny_st_bert

from poolq.jobs.coordination.enqueuer import GPU_QUEUE, model_queue
from poolq.jobs.steps.shards.shard_routing import AFFINITY, GENERAL

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
    from poolq.jobs.settings import Settings
    from poolq.jobs.spec.job_spec import LongDocuments

    engine = PoolingEngine.from_pretrained(str(tiny_model), config=Settings().serving.engine_config(), dtype="float32")
    requests = (PoolingRequest(key=d["id"], text=d["text"], task=PoolingTask.EMBED) for d in sample_documents)
    return {result.key: np.asarray(result.data, dtype=np.float32)
            for result in engine.run(requests, LongDocuments(mode="truncate").policy())}


@pytest.fixture
def fleet(deployment, tiny_model):
    """The deployment, its settings for a worker (the tiny model registered), and a submitter that
    knows the tiny model too."""
    from poolq.jobs.spec.job_spec import JobSpec
    from poolq.jobs.steps.submit import submit_job
    from poolq.worker.celery_app import create_celery_app
    from poolq.worker.celery_tasks import build_worker_context

    models = {TINY: str(tiny_model)}
    settings = deployment.settings.with_values(models=models)
    submitter = build_worker_context(create_celery_app(settings), settings)

    def worker_settings(**values):
        return {"models": json.dumps(models), **values}

    def submit(model: str, documents: list[dict]) -> str:
        return submit_job(submitter, JobSpec.model_validate(deployment.spec_for(documents, {"model": model}))).id

    return deployment, worker_settings, submit


def _holding(deployment, holders: dict[str, int], timeout: float = 60) -> None:
    """Wait until at least ``holders[model]`` live workers say they hold each model."""
    def held() -> bool:
        loaded = deployment.ctx.workers.loaded_models()
        return all(loaded.get(model, 0) >= count for model, count in holders.items())

    deployment.wait(held, timeout, f"the workers to hold {holders}")


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
    # Given a compute worker warm with MiniLM, running the first shard of a MiniLM job (slowly: the
    # job is still running when the other one comes)
    minilm_worker = deployment.start_worker("minilm", slow_s=0.5, settings=worker_settings(warm_models=MINILM))
    _holding(deployment, {MINILM: 1})
    jobs = {submit(MINILM, documents): MINILM}
    deployment.wait_shard_lease(next(iter(jobs)))
    # When a second worker, warm with the tiny model, joins, and a tiny-model job is submitted: the
    # two jobs' shards interleave (6 shards each; fair share hands out one per worker at a time)
    tiny_worker = deployment.start_worker("tiny", slow_s=0.2, settings=worker_settings(warm_models=TINY))
    _holding(deployment, {TINY: 1})
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
    assert placed == {(MINILM, "home"): 6, (TINY, "home"): 6}, (placed, routed)
    assert routed == {AFFINITY: 12}
    # (while the jobs ran side by side: a tiny shard ran before the last MiniLM one)
    started: dict[str, list[float]] = {}
    for delivery in deployment.events("deliveries"):
        started.setdefault(jobs[delivery["job_id"]], []).append(delivery["t"])
    assert min(started[TINY]) < max(started[MINILM]), started


@pytest.mark.settings(worker_heartbeat_s=1)
def test_a_worker_holding_one_model_at_a_time_runs_jobs_of_two_models_to_the_end(fleet, documents, reference,
                                                                               tiny_reference):
    deployment, worker_settings, submit = fleet
    docs = documents  # 4 shards a job
    # Given one compute worker whose model memory holds one model at a time, warm with MiniLM
    worker = deployment.start_worker("one-model", settings=worker_settings(warm_models=MINILM, worker_model_memory=1))
    _holding(deployment, {MINILM: 1})
    # When a MiniLM job and a tiny-model job run together (fair share alternates their shards)
    jobs = {submit(MINILM, docs): reference, submit(TINY, docs): tiny_reference}
    # Then both succeed with every record exactly once
    for job_id, expected in jobs.items():
        deployment.check_outcome(job_id, docs, expected)
    # and the worker loaded the models again as they alternated, each load evicting the other (as its
    # next heartbeat says: one taken during a load shows none loaded)
    def one_loaded():
        totals = deployment.ctx.workers.model_totals()
        return totals if sum(model.loaded_workers for model in totals.values()) == 1 else None

    totals = deployment.wait(one_loaded, 10, "the worker to report the one model it holds")
    assert totals[MINILM].loads >= 2 and totals[TINY].loads >= 1, totals
    assert totals[MINILM].evictions + totals[TINY].evictions == totals[MINILM].loads + totals[TINY].loads - 1, totals

    # When a tiny-model job runs last, so that the worker keeps holding the tiny model
    deployment.check_outcome(submit(TINY, docs[:3]), docs[:3], tiny_reference)
    # Then the worker consumes the tiny model's queue (its pool child asked it to), and gives up
    # MiniLM's, which it no longer holds, once nothing waits there
    deployment.wait(lambda: f"Started consuming from {model_queue(TINY)}" in worker.log(), 10, "the tiny queue consumed")
    deployment.wait(lambda: f"stops consuming {model_queue(MINILM)}" in worker.log(), 10, "MiniLM's queue given up")
    # and a tiny shard now goes to the tiny model's queue, a MiniLM one to the general queue: both run
    routed = deployment.ctx.metrics.totals().routed
    for model, expected in ((TINY, tiny_reference), (MINILM, reference)):
        deployment.check_outcome(submit(model, docs[:3]), docs[:3], expected)
    after = deployment.ctx.metrics.totals().routed
    assert (after.get(AFFINITY, 0) - routed.get(AFFINITY, 0), after.get(GENERAL, 0) - routed.get(GENERAL, 0)) == (1, 1)
    _queues_empty(deployment, MINILM, TINY)


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
    other = deployment.start_worker("other", settings=worker_settings(warm_models=TINY))
    # Then once the dead worker's word runs out, the shard is sent again to the general queue, the
    # other worker runs it (loading MiniLM), and the job succeeds with every record exactly once
    deployment.check_outcome(job_id, documents[:6], reference)
    assert deployment.ctx.metrics.totals().routed.get(GENERAL, 0) >= 1
    committed_by = set(other.children())
    assert any(result["pid"] in committed_by and result["attempt"] for result in deployment.events("delivery_results"))
    # and the stranded message, taken once the worker holding MiniLM now consumed its queue, was a
    # harmless duplicate
    assert f"Started consuming from {model_queue(MINILM)}" in other.log()
    _queues_empty(deployment, MINILM)
