"""Presigned uploads: a tenant PUTs a large input straight to the store, then names it in a job."""
from __future__ import annotations

import secrets
from dataclasses import dataclass

from poolq.jobs.context import JobContext
from poolq.jobs.inputs.input_format import INPUT_SUFFIXES
from poolq.storage import join_key


@dataclass(frozen=True)
class UploadTicket:
    upload_id: str
    uri: str  # what to pass as the job's input.uri
    url: str  # HTTP PUT here, body = the input file
    expires_in_s: int


def create_upload(ctx: JobContext, tenant: str, suffix: str = ".jsonl") -> UploadTicket:
    """A fresh key in the tenant's uploads area, ending in ``suffix`` (one of ``INPUT_SUFFIXES``:
    the key keeps the file's format, so it also reads as one under a prefix), and a short-lived PUT URL.

    The server picks the key, so nothing the caller sends but a known ending becomes part of it.
    Raises ``storage.UnsupportedOperation`` on a store that cannot presign (local).
    """
    if suffix not in INPUT_SUFFIXES:
        raise ValueError(f"an upload ends in one of {', '.join(INPUT_SUFFIXES)}, not {suffix!r}")
    upload_id = secrets.token_hex(16)
    key = join_key(ctx.service_layout.uploads_prefix(tenant), upload_id + suffix)
    expires = ctx.settings.storage.upload_expires_s
    url = ctx.store.presigned_put_url(key, expires)
    return UploadTicket(upload_id=upload_id, uri=f"s3://{ctx.settings.storage.bucket}/{key}", url=url, expires_in_s=expires)
