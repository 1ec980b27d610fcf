"""``GET /metrics``: Prometheus' text format, read from Redis (or memory) when scraped.

Families (``rate()`` of a counter gives a per-second figure, e.g. tokens/s is
``rate(poolq_tokens_total[5m])``):

- ``poolq_jobs{state}``: unfinished jobs by state (queued, running, cancelling), gauge
- ``poolq_jobs_finished_total{state}``: jobs that reached a final state, counter
- ``poolq_queue_depth{queue}``: messages waiting in the ``control`` and ``gpu`` queues, gauge
- ``poolq_shards_in_flight``: shards an attempt is working on now (live leases), gauge
- ``poolq_tokens_total``, ``poolq_documents_embedded_total``: work done by committed shards
- ``poolq_shard_duration_seconds``: wall time of each shard's winning attempt, histogram
- ``poolq_record_errors_total{code}``: records that failed (planning or embedding), by error code
- ``poolq_shards_routed_total{route}``: shard tasks sent to a worker holding the model (``affinity``) or to any (``general``)
- ``poolq_model_loads_total{model}``, ``poolq_model_evictions_total{model}``,
  ``poolq_model_load_seconds_total{model}``: what the live compute workers did with each model,
  counter; ``poolq_model_resident_bytes{model}`` (memory its loaded engines hold) and
  ``poolq_model_loaded_workers{model}`` (live workers holding it), gauges. All are sums over the live
  workers' latest heartbeat reports (``WorkerRegistry.model_totals``), every compute dtype together.
  A worker counts from its own start: one that restarts or stops takes its share out (a counter that
  drops, which ``rate()`` reads as a reset).

Every value is global to the deployment (shared Redis), so every API replica serves the same
numbers: scrape one, or aggregate replicas with ``max``, not ``sum``. The registry is the app's
own (never prometheus_client's global one). Served without a key when ``metrics_public`` (the
default: aggregates only, no tenant data; keep the port inside the cluster), else admin keys only.
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

from fastapi import Depends, FastAPI, Request, Response
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from poolq.api.server.guards.security import admin_caller
from poolq.api.server.guards.unavailable import RETRY_AFTER_S
from poolq.api.server.schemas import OpenApiResponses
from poolq.jobs import LATENCY_BUCKETS_S, JobMetrics, JobState, MetricsTotals, Settings, SystemGauges
from poolq.jobs.coordination.worker_model_stats import ModelTotals
from poolq.jobs.coordination.worker_registry import WorkerRegistry

FINAL_STATES = tuple(state.value for state in JobState if state.is_terminal)


class PoolqCollector(Collector):
    """Reads the recorded counters and the live gauges at each scrape; holds no values itself."""

    def __init__(self, metrics: JobMetrics, gauges: SystemGauges, workers: WorkerRegistry) -> None:
        self.metrics = metrics
        self.gauges = gauges
        self.workers = workers

    def collect(self) -> Iterator[Metric]:
        yield from self._live()
        totals = self.metrics.totals()
        yield from self._work(totals)
        yield _shard_histogram(totals)
        yield from _models(self.workers.model_totals().values())

    def _live(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("poolq_jobs", "Unfinished jobs, by state.", labels=["state"])
        for state, count in self.gauges.jobs_by_state().items():
            jobs.add_metric([state], count)
        depth = GaugeMetricFamily("poolq_queue_depth", "Messages waiting in a Celery queue.", labels=["queue"])
        for queue, count in self.gauges.queue_depths().items():
            depth.add_metric([queue], count)
        in_flight = GaugeMetricFamily("poolq_shards_in_flight", "Shards with a live lease (being embedded now).",
                                      value=self.gauges.shards_in_flight())
        return iter((jobs, depth, in_flight))

    @staticmethod
    def _work(totals: MetricsTotals) -> Iterator[Metric]:
        finished = CounterMetricFamily("poolq_jobs_finished", "Jobs that reached a final state.", labels=["state"])
        for state in FINAL_STATES:
            finished.add_metric([state], totals.finished.get(state, 0))
        errors = CounterMetricFamily("poolq_record_errors", "Records that failed, by error code.", labels=["code"])
        for code, count in sorted(totals.errors.items()):
            errors.add_metric([code], count)
        tokens = CounterMetricFamily("poolq_tokens", "Tokens processed by committed shards (rate() is tokens/s).",
                                     value=totals.tokens)
        documents = CounterMetricFamily("poolq_documents_embedded", "Documents embedded by committed shards.",
                                        value=totals.documents)
        routed = CounterMetricFamily("poolq_shards_routed", "Shard tasks sent, by route: affinity (to a worker holding "
                                     "the model) or general.", labels=["route"])
        for route in ("affinity", "general"):
            routed.add_metric([route], totals.routed.get(route, 0))
        return iter((finished, errors, tokens, documents, routed))


def _shard_histogram(totals: MetricsTotals) -> HistogramMetricFamily:
    buckets, cumulative = [], 0
    for bound, count in zip(LATENCY_BUCKETS_S, totals.shard_buckets):
        cumulative += count
        buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), cumulative))
    return HistogramMetricFamily("poolq_shard_duration_seconds", "Wall time of each committed shard's attempt.",
                                 buckets=buckets, sum_value=totals.shard_latency_sum_s)


# (family, help, kind, its value in a model's totals): one sample per model in each
_MODEL_FAMILIES: tuple[tuple[str, str, type[CounterMetricFamily | GaugeMetricFamily], Callable[[ModelTotals], float]], ...] = (
    ("poolq_model_loads", "Times live compute workers loaded the model (each worker since its start).",
     CounterMetricFamily, lambda model: model.loads),
    ("poolq_model_evictions", "Times live compute workers unloaded the model to make room for another.",
     CounterMetricFamily, lambda model: model.evictions),
    ("poolq_model_load_seconds", "Seconds live compute workers spent loading the model.",
     CounterMetricFamily, lambda model: model.load_seconds),
    ("poolq_model_resident_bytes", "Bytes of the model's weights and buffers held by live workers now.",
     GaugeMetricFamily, lambda model: model.resident_bytes),
    ("poolq_model_loaded_workers", "Live compute workers holding the model loaded now.",
     GaugeMetricFamily, lambda model: model.loaded_workers),
)


def _models(totals: Iterable[ModelTotals]) -> Iterator[Metric]:
    models = list(totals)
    for name, documentation, kind, value in _MODEL_FAMILIES:
        family = kind(name, documentation, labels=["model"])
        for model in models:
            family.add_metric([model.model], value(model))
        yield family


_RESPONSES: OpenApiResponses = {
    200: {"content": {"text/plain": {}, "application/openmetrics-text": {}}},
    503: {"description": "Redis is unreachable", "content": {"text/plain": {}}},
}


def install_metrics(app: FastAPI, settings: Settings, metrics: JobMetrics, gauges: SystemGauges,
                    workers: WorkerRegistry) -> None:
    """Add ``GET /metrics`` to ``app``, over a registry of its own."""
    registry = CollectorRegistry()
    registry.register(PoolqCollector(metrics, gauges, workers))
    app.state.metrics_registry = registry
    guard = [] if settings.observability.metrics_public else [Depends(admin_caller)]

    @app.get("/metrics", tags=["ops"], dependencies=guard, response_class=Response, responses=_RESPONSES)
    def metrics_endpoint(request: Request) -> Response:
        """Prometheus metrics: text format 0.0.4, or what the scraper's Accept header asks for."""
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        try:
            body = encode(registry)
        except Exception as exc:  # noqa: BLE001 - a failed read means no scrape; say which
            return Response(f"metrics unavailable: {type(exc).__name__}\n", status_code=503, media_type="text/plain",
                            headers={"Retry-After": str(RETRY_AFTER_S)})
        return Response(body, headers={"Content-Type": content_type})
