"""Deleting files past their ``expires_at`` (OpenAI's ``expires_after``, a batch's
``output_expires_after``), at each reconciler pass.

Each expiring file has an empty marker ``_files_expiring/<expires_at>/<tenant>/<file id>``; a
listing returns them soonest first, so a pass reads only the markers that are due, plus one.
"""
from __future__ import annotations

import logging

from poolq.jobs.context import JobContext
from poolq.products.batches.batch_files import remove_file
from poolq.products.batches.batch_layout import BatchLayout, expiring_files_prefix

log = logging.getLogger(__name__)


def delete_expired_files(ctx: JobContext, now: float) -> int:
    """Delete every file whose expiry time has come, and its marker; returns how many."""
    prefix = expiring_files_prefix(ctx.service_layout)
    deleted = 0
    for marker in ctx.store.list(prefix):
        expires_at, _, rest = marker[len(prefix):].partition("/")
        tenant, _, file_id = rest.rpartition("/")
        if not expires_at.isdigit() or not tenant:
            log.warning("ignoring a malformed file expiry marker %s", marker)
            continue
        if int(expires_at) > now:
            break  # the rest are due later
        remove_file(ctx, BatchLayout(ctx.service_layout, tenant), file_id)
        ctx.store.delete(marker)
        deleted += 1
    return deleted
