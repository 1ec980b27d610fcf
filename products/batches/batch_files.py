"""OpenAI-style files of a tenant: uploaded batch inputs and the batches' output and error files.

Content streams into the store (multipart above the store's threshold), counted as it goes: a
file over ``max_bytes`` stops the upload there (nothing is kept). Its record, written after the
content, is what makes a file exist; a file is never changed once written. A file given an expiry
is gone at ``expires_at`` (``file_expiry.py`` deletes it; until then it reads as deleted).
"""
from __future__ import annotations

import re
import time
from typing import BinaryIO, Iterable, Iterator

from poolq.jobs.context import JobContext
from poolq.products.batches.batch_layout import FILE_ID, BatchLayout, new_file_id
from poolq.products.batches.openai_objects import DeletedFile, FileObject, FilePurpose, Page
from poolq.storage import ObjectNotFoundError

_READ_BYTES = 1 << 20
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_FILENAME = 255


class FileTooLarge(ValueError):
    """The upload passed the server's file size limit."""


class FileNotFound(LookupError):
    """No such file, or another tenant's."""


def _layout(ctx: JobContext, tenant: str) -> BatchLayout:
    return BatchLayout(ctx.service_layout, tenant)


def create_file(ctx: JobContext, tenant: str, filename: str, purpose: FilePurpose, stream: BinaryIO,
                max_bytes: int, expires_after_s: int | None = None) -> FileObject:
    """Store ``stream`` as a new file of ``tenant``; ``FileTooLarge`` past ``max_bytes``."""
    counted = 0

    def chunks() -> Iterator[bytes]:
        nonlocal counted
        while chunk := stream.read(_READ_BYTES):
            counted += len(chunk)
            if counted > max_bytes:
                raise FileTooLarge(f"the file is larger than {max_bytes} bytes (POOLQ_MAX_FILE_BYTES)")
            yield chunk

    return write_file(ctx, tenant, filename, purpose, chunks(), expires_after_s=expires_after_s)


def write_file(ctx: JobContext, tenant: str, filename: str, purpose: FilePurpose, chunks: Iterable[bytes],
               file_id: str | None = None, expires_after_s: int | None = None) -> FileObject:
    """Write a file's content, then its record (``file_id``: a name chosen by the caller, so a step
    that writes it twice writes the same file). ``expires_after_s``: the file expires that long
    after its creation (its expiry marker is written first, so no expiring file goes unswept)."""
    layout = _layout(ctx, tenant)
    file_id = file_id or new_file_id()
    written = {"bytes": 0}

    def counting() -> Iterator[bytes]:
        for chunk in chunks:
            written["bytes"] += len(chunk)
            yield chunk

    ctx.store.put_chunks(layout.file_content(file_id), counting())
    created_at = int(time.time())
    expires_at = None if expires_after_s is None else created_at + expires_after_s
    record = FileObject(id=file_id, bytes=written["bytes"], created_at=created_at, expires_at=expires_at,
                        filename=clean_filename(filename), purpose=purpose)
    if expires_at is not None:
        ctx.store.put(layout.expiry_marker(expires_at, file_id), b"")
    ctx.store.put(layout.file_record(file_id), record.model_dump_json().encode())
    return record


def clean_filename(filename: str) -> str:
    """The name as given, without control characters, at most ``MAX_FILENAME`` characters."""
    return _UNPRINTABLE.sub("_", filename)[:MAX_FILENAME] or "upload.jsonl"


def get_file(ctx: JobContext, tenant: str, file_id: str) -> FileObject:
    """The file's record; ``FileNotFound`` if there is none, or it has expired (and awaits its sweep)."""
    if not FILE_ID.match(file_id):
        raise FileNotFound(file_id)
    try:
        record = FileObject.model_validate_json(ctx.store.get(_layout(ctx, tenant).file_record(file_id)))
    except ObjectNotFoundError:
        raise FileNotFound(file_id) from None
    if record.expires_at is not None and record.expires_at <= time.time():
        raise FileNotFound(file_id)
    return record


def open_file_content(ctx: JobContext, tenant: str, file_id: str) -> BinaryIO:
    get_file(ctx, tenant, file_id)
    try:
        return ctx.store.open(_layout(ctx, tenant).file_content(file_id))
    except ObjectNotFoundError:
        raise FileNotFound(file_id) from None


def delete_file(ctx: JobContext, tenant: str, file_id: str) -> DeletedFile:
    get_file(ctx, tenant, file_id)
    remove_file(ctx, _layout(ctx, tenant), file_id)
    return DeletedFile(id=file_id)


def remove_file(ctx: JobContext, layout: BatchLayout, file_id: str) -> None:
    """Delete a file's objects, the record first: a half-deleted file no longer exists. (An expiry
    marker left behind finds nothing when it comes due.)"""
    ctx.store.delete(layout.file_record(file_id))
    ctx.store.delete(layout.file_content(file_id))


def list_files(ctx: JobContext, tenant: str, *, after: str | None = None, limit: int = 20, order: str = "desc",
               purpose: str | None = None) -> Page[FileObject]:
    """The tenant's files by creation, ``order`` asc or desc, those past ``after`` (a file id)."""
    prefix = _layout(ctx, tenant).files_prefix
    ids = [key[len(prefix):].removesuffix(".json") for key in ctx.store.list(prefix)]
    ids = sorted(ids, reverse=order == "desc")
    if after is not None:
        ids = [file_id for file_id in ids if (file_id < after if order == "desc" else file_id > after)]
    found: list[FileObject] = []
    for file_id in ids:
        try:
            record = get_file(ctx, tenant, file_id)
        except FileNotFound:  # deleted while listing
            continue
        if purpose is None or record.purpose == purpose:
            found.append(record)
        if len(found) > limit:
            break
    return page(found, limit)


def page(found: list, limit: int) -> Page:
    """``found`` (up to ``limit`` + 1 items) as one page: ``has_more`` if there was one more."""
    data = found[:limit]
    return Page(data=data, first_id=data[0].id if data else None, last_id=data[-1].id if data else None,
                has_more=len(found) > limit)
