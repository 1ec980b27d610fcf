"""Reading a job's input: inline documents, one JSONL object, or every ``*.jsonl`` under a prefix.

A URI ending in ``/`` is a prefix: its ``.jsonl`` and ``.jsonl.gz`` objects are read one after
another in key order, each line tagged with the object it came from, so errors can say
``<uri>: line 7``. Gzip-compressed objects are read as such whatever their name.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from poolq.jobs.context import JobContext
from poolq.jobs.job import InlineInput, JobSpec
from poolq.storage import (
    JsonlLineError,
    JsonlObject,
    LocalObjectStore,
    ObjectNotFoundError,
    ObjectStore,
    ObjectURI,
    S3Config,
    open_uri,
    parse_uri,
    read_jsonl,
)

INPUT_SUFFIXES = (".jsonl", ".jsonl.gz")


def is_prefix(uri: str) -> bool:
    """A URI that names every ``*.jsonl`` object under it rather than one object."""
    return uri.endswith("/")


def parse_input_uri(uri: str) -> ObjectURI:
    """Parse an input URI, object or prefix (``InvalidURIError`` if it is neither)."""
    return parse_uri(uri.rstrip("/") if is_prefix(uri) else uri)


@dataclass(frozen=True)
class InputObject:
    """One object of a job's input, as planning read it."""

    uri: str  # where it is: shards read their byte ranges of it from here
    version: str  # ObjectInfo.version when planning read it
    name: str | None  # its name in error messages: the URI for a prefix input; None for a single object


def input_lines(spec: JobSpec, job_id: str, ctx: JobContext) -> Iterator[tuple[InputObject, JsonlObject | JsonlLineError]]:
    """Every line of the job's input, with the object it is in."""
    if isinstance(spec.input, InlineInput):
        yield from _object_lines(ctx.store, ctx.layout(job_id).inline_input, named=False)
        return
    uri = spec.input.uri
    if not is_prefix(uri):
        store, key = open_uri(uri, ctx.settings.s3_config())
        yield from _object_lines(store, key, named=False)
        return
    store, prefix = _open_prefix(uri, ctx.settings.s3_config())
    keys = [key for key in store.list(prefix) if key.endswith(INPUT_SUFFIXES)]
    if not keys:
        raise ObjectNotFoundError(f"{uri} holds no {' or '.join('*' + suffix for suffix in INPUT_SUFFIXES)} objects")
    for key in keys:
        yield from _object_lines(store, key, named=True)


def input_size(spec: JobSpec, job_id: str, ctx: JobContext) -> int:
    """Bytes of the job's input (one listing and a HEAD per object), to size planning's partitions."""
    if isinstance(spec.input, InlineInput):
        return ctx.store.stat(ctx.layout(job_id).inline_input).size
    uri = spec.input.uri
    if not is_prefix(uri):
        store, key = open_uri(uri, ctx.settings.s3_config())
        return store.stat(key).size
    store, prefix = _open_prefix(uri, ctx.settings.s3_config())
    return sum(store.stat(key).size for key in store.list(prefix) if key.endswith(INPUT_SUFFIXES))


def _object_lines(store: ObjectStore, key: str, named: bool) -> Iterator[tuple[InputObject, JsonlObject | JsonlLineError]]:
    uri = store.uri(key)
    source = InputObject(uri, store.stat(key).version, uri if named else None)
    with store.open(key) as stream:
        for item in read_jsonl(stream):
            yield source, item


def _open_prefix(uri: str, s3_config: S3Config) -> tuple[ObjectStore, str]:
    """The store a prefix URI points into and the key prefix to list there (``""``: all of it)."""
    target = parse_input_uri(uri)
    if target.scheme == "file":  # the directory itself is the store: listing never walks its parents
        directory = Path(target.container) / target.key
        if not directory.is_dir():
            raise ObjectNotFoundError(f"{uri} is not a directory")
        return LocalObjectStore(directory), ""
    store, key = open_uri(uri.rstrip("/"), s3_config)
    return store, key + "/"
