"""A configured sink, by name (``POOLQ_SINKS``): what the API checks at submission. No store's
driver is imported here, so the API process needs none of them (infra/docker/api.Dockerfile)."""
from __future__ import annotations

from poolq.jobs.settings import Settings
from poolq.jobs.sink_settings import SinkConfig
from poolq.products.sinks.sink import SinkError

SCHEMES = ("postgresql", "postgres", "lancedb", "lancedb+s3", "qdrant+local", "qdrant", "qdrants", "memory")


class UnknownSink(SinkError):
    """The job names a sink the operator has not configured."""


def sink_config(name: str, settings: Settings) -> SinkConfig:
    config = settings.vector_sinks.sinks.get(name)
    if config is None:
        raise UnknownSink(f"sink {name!r} is not configured (POOLQ_SINKS)")
    if config.scheme not in SCHEMES:
        raise SinkError(f"sink {name!r}: unsupported URL scheme {config.scheme!r}; known: {', '.join(SCHEMES)}")
    return config
