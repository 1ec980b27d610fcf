"""A configured sink's store, by the scheme of its URL (docs/sinks/): the workers' side.

Each store's driver (psycopg, lancedb, qdrant-client: about 100 MB of imports together) is imported
by its opener, when a sink of that scheme is first opened, not by every process that imports the
jobs layer: planning, the API and a worker with no sink never pay for them."""
from __future__ import annotations

import importlib
from collections.abc import Callable
from urllib.parse import SplitResult, parse_qs, urlsplit

from poolq.jobs.settings import Settings
from poolq.jobs.sink_settings import SinkConfig
from poolq.products.sinks.configured_sinks import sink_config
from poolq.products.sinks.sink import Sink
from poolq.products.sinks.stores.memory_sink import MemorySink

SinkOpener = Callable[[SinkConfig, SplitResult, Settings], Sink]


def _store(module: str, name: str) -> type:
    """A store's Sink class, its driver imported now (``poolq.products.sinks.stores.<module>``)."""
    return getattr(importlib.import_module(f"poolq.products.sinks.stores.{module}"), name)


def _pgvector(config: SinkConfig, url: SplitResult, settings: Settings) -> Sink:
    return _store("pgvector_sink", "PgvectorSink")(config)


def _lancedb(config: SinkConfig, url: SplitResult, settings: Settings) -> Sink:
    return _store("lancedb_sink", "LanceDbSink")(config, url.path)


def _lancedb_in_bucket(config: SinkConfig, url: SplitResult, settings: Settings) -> Sink:
    return _store("lancedb_sink", "LanceDbSink")(config, f"s3://{url.netloc}{url.path}", _s3_options(settings))


def _qdrant_local(config: SinkConfig, url: SplitResult, settings: Settings) -> Sink:
    return _store("qdrant_sink", "QdrantSink")(config, {"path": url.path})


def _qdrant_server(config: SinkConfig, url: SplitResult, settings: Settings) -> Sink:
    api_key = parse_qs(url.query).get("api_key", [None])[0]
    http = "https" if url.scheme == "qdrants" else "http"
    client = {"url": f"{http}://{url.hostname}:{url.port or 6333}", "api_key": api_key, "timeout": 30}
    return _store("qdrant_sink", "QdrantSink")(config, client)


def _memory(config: SinkConfig, url: SplitResult, settings: Settings) -> Sink:
    return MemorySink.named(url.netloc + url.path, config.create_table)


# Every scheme configured_sinks.SCHEMES accepts, and how its store is opened.
OPENERS: dict[str, SinkOpener] = {
    "postgresql": _pgvector, "postgres": _pgvector, "lancedb": _lancedb, "lancedb+s3": _lancedb_in_bucket,
    "qdrant+local": _qdrant_local, "qdrant": _qdrant_server, "qdrants": _qdrant_server, "memory": _memory,
}


def open_sink(name: str, settings: Settings) -> Sink:
    """The store of sink ``name``; nothing is connected until the sink is used."""
    config = sink_config(name, settings)
    return OPENERS[config.scheme](config, urlsplit(config.url.get_secret_value()), settings)


def _s3_options(settings: Settings) -> dict[str, str]:
    """The deployment's bucket credentials, for a Lance dataset in the bucket."""
    storage = settings.storage
    options = {"region": storage.s3_region}
    if storage.s3_endpoint_url:
        options |= {"endpoint": storage.s3_endpoint_url, "allow_http": str(storage.s3_endpoint_url.startswith("http:")).lower()}
    if storage.s3_access_key_id and storage.s3_secret_access_key:
        options |= {"aws_access_key_id": storage.s3_access_key_id, "aws_secret_access_key": storage.s3_secret_access_key}
    return options
