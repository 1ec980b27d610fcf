"""A configured sink's store, by the scheme of its URL (docs/sinks/)."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from poolq.jobs.settings import Settings, SinkConfig
from poolq.jobs.sinks.lancedb_sink import LanceDbSink
from poolq.jobs.sinks.memory_sink import MemorySink
from poolq.jobs.sinks.pgvector_sink import PgvectorSink
from poolq.jobs.sinks.qdrant_sink import QdrantSink
from poolq.jobs.sinks.sink import Sink, SinkError

SCHEMES = ("postgresql", "postgres", "lancedb", "lancedb+s3", "qdrant+local", "qdrant", "qdrants", "memory")


class UnknownSink(SinkError):
    """The job names a sink the operator has not configured."""


def sink_config(name: str, settings: Settings) -> SinkConfig:
    config = settings.sinks.get(name)
    if config is None:
        raise UnknownSink(f"sink {name!r} is not configured (POOLQ_SINKS)")
    if config.scheme not in SCHEMES:
        raise SinkError(f"sink {name!r}: unsupported URL scheme {config.scheme!r}; known: {', '.join(SCHEMES)}")
    return config


def open_sink(name: str, settings: Settings) -> Sink:
    """The store of sink ``name``; nothing is connected until the sink is used."""
    config = sink_config(name, settings)
    url = urlsplit(config.url.get_secret_value())
    scheme = config.scheme
    if scheme in ("postgresql", "postgres"):
        return PgvectorSink(config)
    if scheme == "lancedb":
        return LanceDbSink(config, url.path)
    if scheme == "lancedb+s3":
        return LanceDbSink(config, f"s3://{url.netloc}{url.path}", _s3_options(settings))
    if scheme == "qdrant+local":
        return QdrantSink(config, {"path": url.path})
    if scheme in ("qdrant", "qdrants"):
        api_key = parse_qs(url.query).get("api_key", [None])[0]
        http = "https" if scheme == "qdrants" else "http"
        return QdrantSink(config, {"url": f"{http}://{url.hostname}:{url.port or 6333}", "api_key": api_key, "timeout": 30})
    return MemorySink.named(url.netloc + url.path, config.create_table)


def _s3_options(settings: Settings) -> dict[str, str]:
    """The deployment's bucket credentials, for a Lance dataset in the bucket."""
    options = {"region": settings.s3_region}
    if settings.s3_endpoint_url:
        options |= {"endpoint": settings.s3_endpoint_url, "allow_http": str(settings.s3_endpoint_url.startswith("http:")).lower()}
    if settings.s3_access_key_id and settings.s3_secret_access_key:
        options |= {"aws_access_key_id": settings.s3_access_key_id, "aws_secret_access_key": settings.s3_secret_access_key}
    return options
