"""Which sinks a tenant's jobs and schedules may load into: those the operator configured and
granted to it (``POOLQ_SINK_GRANTS='{"acme": ["search-db"]}'``), for a task that has vectors."""
from __future__ import annotations

from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.products.sinks.configured_sinks import sink_config
from poolq.products.sinks.sink_rows import SINK_TASKS, sink_row_columns_named


class SinkNotAllowed(ValueError):
    """The sink is unknown, not granted to the tenant, or cannot hold the job's task or fields
    (``field``: the spec's field that says so)."""

    def __init__(self, message: str, field: str = "sink") -> None:
        super().__init__(message)
        self.field = field


def check_sink_access(spec: JobSpec, tenant: str, settings: Settings) -> None:
    """SinkNotAllowed naming why, if ``spec`` names a sink ``tenant`` may not use."""
    if spec.sink is None:
        return
    # An ungranted sink reads as unknown: a tenant learns nothing of other tenants' sinks.
    if spec.sink not in settings.vector_sinks.sinks or spec.sink not in settings.vector_sinks.sink_grants.get(tenant, []):
        raise SinkNotAllowed(f"sink {spec.sink!r} is not configured for tenant {tenant!r}; an operator grants "
                             "sinks (POOLQ_SINK_GRANTS)")
    tasks = set(spec.task) if isinstance(spec.task, list) else {spec.task}
    if not tasks <= SINK_TASKS:
        raise SinkNotAllowed(f"task {spec.task_label} has no vectors to load; sinks take embed, sparse_embed, token_embed")
    taken = sink_row_columns_named(spec.output.include_fields)
    if taken:
        raise SinkNotAllowed(f"{', '.join(taken)}: a sink row holds a column of that name (its key, origin or vectors); "
                             "rename the field to load it into a sink", field="output.include_fields")
    config = sink_config(spec.sink, settings)
    if config.scheme in ("postgresql", "postgres") and "token_embed" in tasks:
        raise SinkNotAllowed(f"sink {spec.sink!r} is pgvector, which keeps one vector per row: token_embed "
                             "(multi-vector) jobs load into Qdrant or LanceDB")
