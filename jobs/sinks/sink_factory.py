"""A configured sink's store, by the scheme of its URL (docs/sinks/): the workers' side, which
imports every store's driver."""
from __future__ import annotations

from collections.abc import Callable
from urllib.parse import SplitResult, parse_qs, urlsplit

from poolq.jobs.settings import Settings, SinkConfig
from poolq.jobs.sinks.configured_sinks import sink_config
from poolq.jobs.sinks.lancedb_sink import LanceDbSink
from poolq.jobs.sinks.memory_sink import MemorySink
from poolq.jobs.sinks.pgvector_sink import PgvectorSink
from poolq.jobs.sinks.qdrant_sink import QdrantSink
from poolq.jobs.sinks.sink import Sink

SinkOpener = Callable[[SinkConfig, SplitResult, Settings], Sink]


def _qdrant_server(config: SinkConfig, url: SplitResult, settings: Settings) -> Sink:
    api_key = parse_qs(url.query).get("api_key", [None])[0]
    http = "https" if url.scheme == "qdrants" else "http"
    return QdrantSink(config, {"url": f"{http}://{url.hostname}:{url.port or 6333}", "api_key": api_key, "timeout": 30})


# Every scheme configured_sinks.SCHEMES accepts, and how its store is opened.
OPENERS: dict[str, SinkOpener] = {
    "postgresql": lambda config, url, settings: PgvectorSink(config),
    "postgres": lambda config, url, settings: PgvectorSink(config),
    "lancedb": lambda config, url, settings: LanceDbSink(config, url.path),
    "lancedb+s3": lambda config, url, settings: LanceDbSink(config, f"s3://{url.netloc}{url.path}", _s3_options(settings)),
    "qdrant+local": lambda config, url, settings: QdrantSink(config, {"path": url.path}),
    "qdrant": _qdrant_server,
    "qdrants": _qdrant_server,
    "memory": lambda config, url, settings: MemorySink.named(url.netloc + url.path, config.create_table),
}


def open_sink(name: str, settings: Settings) -> Sink:
    """The store of sink ``name``; nothing is connected until the sink is used."""
    config = sink_config(name, settings)
    return OPENERS[config.scheme](config, urlsplit(config.url.get_secret_value()), settings)


def _s3_options(settings: Settings) -> dict[str, str]:
    """The deployment's bucket credentials, for a Lance dataset in the bucket."""
    options = {"region": settings.s3_region}
    if settings.s3_endpoint_url:
        options |= {"endpoint": settings.s3_endpoint_url, "allow_http": str(settings.s3_endpoint_url.startswith("http:")).lower()}
    if settings.s3_access_key_id and settings.s3_secret_access_key:
        options |= {"aws_access_key_id": settings.s3_access_key_id, "aws_secret_access_key": settings.s3_secret_access_key}
    return options
