"""Fetching a job's result files from the URLs its manifest lists, and decoding its vectors.

The API's ``/results`` gives presigned ``https://`` URLs on S3 and ``file://`` URIs on the local
store (which needs no signature); both are read here. Presigned URLs carry their own
authorization, so they are fetched without the API key.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import httpx

from poolq.api.server.schemas import JobResults

_CHUNK = 1 << 20


class DownloadError(RuntimeError):
    """A result file could not be fetched from its (presigned) URL."""


def fetch_bytes(url: str, http: httpx.Client) -> bytes:
    """The whole object at ``url`` (``http(s)://`` or ``file://``)."""
    if url.startswith("file://"):
        return _local_path(url).read_bytes()
    response = http.get(url)
    if response.status_code >= 400:
        raise DownloadError(f"GET {_without_query(url)} answered HTTP {response.status_code}: {response.text[:200]}")
    return response.content


def save_url(url: str, target: Path, http: httpx.Client) -> Path:
    """Stream the object at ``url`` into ``target`` (written to a temp name, then renamed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    try:
        if url.startswith("file://"):
            shutil.copyfile(_local_path(url), partial)
        else:
            _stream_to(url, partial, http)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def local_part_path(key: str) -> Path:
    """Where a part goes in a job's results folder: ``parts/<its object's name>``."""
    return Path("parts") / key.rsplit("/", 1)[-1]


def with_local_paths(manifest: dict, part_paths: list[Path]) -> dict:
    """The stored manifest as a results folder's ``manifest.json`` holds it: every part (and the
    error file, ``errors.jsonl``) with its ``path`` in the folder; nothing else changed."""
    parts = [{**part, "path": path.as_posix()} for part, path in zip(manifest.get("parts", []), part_paths)]
    return {**manifest, "parts": parts, "errors": {**manifest.get("errors", {}), "path": "errors.jsonl"}}


def decode_vectors(table, results: JobResults):
    """The ``embedding`` column of ``table`` as float32 ``[rows, d]``, decoded with the job's
    ``output`` block (float16/int8 back to float32 as closely as they allow; binary as ±1 signs)."""
    from poolq.storage import codec_for

    output = results.output
    if output is None:  # a manifest from before output blocks: float32 vectors
        codec, dimensions = codec_for("float32"), results.dimensions
    else:
        value_range = (output.min, output.max) if output.min is not None and output.max is not None else None
        codec, dimensions = codec_for(output.dtype, value_range), output.dimensions or results.dimensions
    column = table.column("embedding")
    if dimensions is None:  # a table with vectors always has them: a manifest that lost them is corrupt
        raise ValueError(f"job {results.job_id}: its manifest gives its vectors no dimensions")
    return codec.decode(column, dimensions)


def _stream_to(url: str, path: Path, http: httpx.Client) -> None:
    with http.stream("GET", url) as response:
        if response.status_code >= 400:
            response.read()
            raise DownloadError(f"GET {_without_query(url)} answered HTTP {response.status_code}: {response.text[:200]}")
        with path.open("wb") as handle:
            for chunk in response.iter_bytes(_CHUNK):
                handle.write(chunk)


def _local_path(url: str) -> Path:
    path = Path(unquote(urlparse(url).path))
    if not path.is_file():
        raise DownloadError(f"{url}: no such file")
    return path


def _without_query(url: str) -> str:
    """A presigned URL without its signature, for error messages."""
    return url.split("?", 1)[0]
