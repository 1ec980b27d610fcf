"""A job's input objects: inline documents, one object, or every input object under a prefix.

A URI ending in ``/`` is a prefix: its ``.jsonl``, ``.jsonl.gz`` and ``.parquet`` objects are
read in key order, and errors name the object they are in (``<uri>: line 7``, ``<uri>: row 7``).
A superseding prefix (``input.supersede``: versions of one corpus, such as a tenant's uploads,
whose keys are random) is read oldest object first, last-modified then key: the decide stage lets
a later object's record replace an earlier one's (``id_partitions.py``).
Each object's format is its own (``input_format.py``); ``jobs/planning/sections.py`` cuts the
objects into sections.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from poolq.jobs.inputs.input_format import INPUT_SUFFIXES
from poolq.jobs.inputs.input_uri import is_prefix, parse_input_uri
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_spec import InlineInput
from poolq.storage import (
    LocalObjectStore,
    ObjectNotFoundError,
    ObjectStore,
    S3Config,
    open_uri,
)


def input_objects(job: JobHandle) -> Iterator[tuple[ObjectStore, str, bool]]:
    """Each object of the job's input, in order: ``(store, key, named)``; ``named``: errors name the
    object (a prefix input), else they say only ``line N``."""
    ctx, spec = job.ctx, job.spec
    if isinstance(spec.input, InlineInput):
        yield ctx.store, job.layout.inline_input, False
        return
    uri = spec.input.uri
    if not is_prefix(uri):
        store, key = open_uri(uri, ctx.settings.storage.s3_config())
        yield store, key, False
        return
    store, prefix = _open_prefix(uri, ctx.settings.storage.s3_config())
    keys = [key for key in store.list(prefix) if key.endswith(INPUT_SUFFIXES)]
    if not keys:
        *others, last = ["*" + suffix for suffix in INPUT_SUFFIXES]
        raise ObjectNotFoundError(f"{uri} holds no {', '.join(others)} or {last} objects")
    for key in oldest_first(store, keys) if spec.input.supersede else keys:
        yield store, key, True


def oldest_first(store: ObjectStore, keys: list[str]) -> list[str]:
    """``keys`` by last-modified time, then key (objects written at the same time, to S3's whole
    second, or in a store that does not say when, keep key order). One HEAD per object."""
    modified = {key: store.stat(key).modified or 0.0 for key in keys}
    return sorted(keys, key=lambda key: (modified[key], key))


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
