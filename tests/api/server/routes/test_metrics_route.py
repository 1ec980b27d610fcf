"""``GET /metrics``: Prometheus text that parses, with every family and values that add up, on an
in-process job context; optional auth; 503 when Redis cannot be read."""
from dataclasses import replace

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from support.api_client import authed_client

from poolq.jobs.coordination.enqueuer import Enqueuer
from poolq.jobs.coordination.leases import InMemoryLeaseStore
from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.coordination.worker_model_stats import WorkerModelStats
from poolq.jobs.observability.job_metrics import RedisJobMetrics

FAMILIES = {
    "poolq_jobs": "gauge", "poolq_jobs_finished": "counter", "poolq_queue_depth": "gauge",
    "poolq_shards_in_flight": "gauge", "poolq_tokens": "counter", "poolq_documents_embedded": "counter",
    "poolq_shard_duration_seconds": "histogram", "poolq_record_errors": "counter",
    "poolq_model_loads": "counter", "poolq_model_evictions": "counter", "poolq_model_load_seconds": "counter",
    "poolq_model_resident_bytes": "gauge", "poolq_model_loaded_workers": "gauge", "poolq_shards_routed": "counter",
}


def _scrape(client: TestClient) -> dict[str, dict]:
    """Family name -> {"type", "samples": {(sample name, sorted labels): value}}."""
    response = client.get("/metrics", headers={"Authorization": ""})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {
        family.name: {"type": family.type,
                      "samples": {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}}
        for family in text_string_to_metric_families(response.text)
    }


def test_metrics_after_an_in_process_job(local_ctx):
    client = authed_client(local_ctx)
    documents = [{"id": str(i), "text": f"document {i} about pooling"} for i in range(6)]
    documents.append({"id": "blank", "text": " "})
    job = client.post("/v1/jobs", json={"input": {"documents": documents}}).json()
    status = client.get(f"/v1/jobs/{job['id']}").json()
    assert status["status"] == "partially_succeeded"

    families = _scrape(client)
    assert {name: family["type"] for name, family in families.items() if name.startswith("poolq_")} == FAMILIES

    def value(family, name, **labels):
        return families[family]["samples"][(name, tuple(sorted(labels.items())))]

    for state in ("queued", "running", "cancelling"):
        assert value("poolq_jobs", "poolq_jobs", state=state) == 0
    assert value("poolq_jobs_finished", "poolq_jobs_finished_total", state="partially_succeeded") == 1
    assert value("poolq_jobs_finished", "poolq_jobs_finished_total", state="succeeded") == 0
    assert value("poolq_queue_depth", "poolq_queue_depth", queue="gpu") == 0
    assert value("poolq_shards_in_flight", "poolq_shards_in_flight") == 0
    assert value("poolq_tokens", "poolq_tokens_total") == status["usage"]["tokens"] > 0
    assert value("poolq_documents_embedded", "poolq_documents_embedded_total") == 6
    assert value("poolq_record_errors", "poolq_record_errors_total", code="empty_text") == 1
    # no worker holds the model in process: both shards went to the general queue
    assert value("poolq_shards_routed", "poolq_shards_routed_total", route="general") == 2
    assert value("poolq_shards_routed", "poolq_shards_routed_total", route="affinity") == 0
    histogram = "poolq_shard_duration_seconds"
    assert value(histogram, f"{histogram}_count") == 2  # 6 documents, 4 per shard
    assert value(histogram, f"{histogram}_bucket", le="+Inf") == 2 and value(histogram, f"{histogram}_sum") > 0
    buckets = [v for (name, _), v in families[histogram]["samples"].items() if name.endswith("_bucket")]
    assert buckets == sorted(buckets) and len(buckets) == 11


def test_model_families_sum_the_live_workers_reports(local_ctx):
    workers = local_ctx.workers
    for worker in ("w1", "w2"):
        workers.heartbeat(worker, ttl_s=60)
    workers.heartbeat("gone", ttl_s=60, now=0)  # its word ran out long ago: not counted
    workers.report_models("w1", [WorkerModelStats("minilm", "float32", 2, 1, 1.5, 100, True, 0),
                                 WorkerModelStats("minilm", "float16", 1, 0, 0.5, 60, True, 1),
                                 WorkerModelStats("bge", "float32", 3, 3, 4.0, 900, False, 0)], ttl_s=60)
    workers.report_models("w2", [WorkerModelStats("minilm", "float32", 1, 0, 1.0, 100, True, 0)], ttl_s=60)
    workers.report_models("gone", [WorkerModelStats("minilm", "float32", 9, 9, 9.0, 100, True, 0)], ttl_s=60)
    families = _scrape(authed_client(local_ctx))

    def by_model(family, sample):
        return {dict(labels)["model"]: value for (name, labels), value in families[family]["samples"].items() if name == sample}

    assert by_model("poolq_model_loads", "poolq_model_loads_total") == {"minilm": 4, "bge": 3}
    assert by_model("poolq_model_evictions", "poolq_model_evictions_total") == {"minilm": 1, "bge": 3}
    assert by_model("poolq_model_load_seconds", "poolq_model_load_seconds_total") == {"minilm": 3.0, "bge": 4.0}
    assert by_model("poolq_model_resident_bytes", "poolq_model_resident_bytes") == {"minilm": 260, "bge": 0}
    assert by_model("poolq_model_loaded_workers", "poolq_model_loaded_workers") == {"minilm": 2, "bge": 0}


class _HoldingEnqueuer(Enqueuer):
    def plan(self, job_id): ...
    def plan_section(self, job_id, stage, section): ...
    def run_shard(self, job_id, shard): ...
    def finalize(self, job_id): ...


def test_a_queued_job_is_counted_until_it_finishes(local_ctx):
    ctx = replace(local_ctx, status=InMemoryJobStatusStore(), leases=InMemoryLeaseStore(), enqueuer=_HoldingEnqueuer())
    client = authed_client(ctx)
    assert client.post("/v1/jobs", json={"input": {"documents": [{"id": "a", "text": "x"}]}}).status_code == 202
    assert _scrape(client)["poolq_jobs"]["samples"][("poolq_jobs", (("state", "queued"),))] == 1


def test_metrics_can_require_an_admin_key(local_ctx):
    settings = local_ctx.settings.with_values(metrics_public=False)
    admin = authed_client(local_ctx, settings)
    assert admin.get("/metrics").status_code == 200
    assert admin.get("/metrics", headers={"Authorization": ""}).status_code == 401
    key, _ = admin.app.state.keys.create("local", admin=False)
    assert admin.get("/metrics", headers={"Authorization": f"Bearer {key}"}).status_code == 403


def test_each_app_has_its_own_registry(local_ctx):
    first, second = authed_client(local_ctx), authed_client(local_ctx)
    assert first.app.state.metrics_registry is not second.app.state.metrics_registry
    assert first.get("/metrics").status_code == second.get("/metrics").status_code == 200


def test_metrics_answer_503_when_redis_is_unreachable(local_ctx, closed_port):
    import redis

    local_ctx.metrics = RedisJobMetrics(redis.Redis.from_url(f"redis://127.0.0.1:{closed_port}/0"))
    response = authed_client(local_ctx).get("/metrics")
    assert response.status_code == 503 and "ConnectionError" in response.text


def test_an_openmetrics_scraper_gets_openmetrics(local_ctx):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

    response = authed_client(local_ctx).get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/openmetrics-text")
    assert {family.name for family in parse_openmetrics(response.text)} >= set(FAMILIES)
