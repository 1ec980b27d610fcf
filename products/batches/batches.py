"""The Batch API's operations on a tenant's batches: create, read, list, cancel."""
from __future__ import annotations

import logging
import time

from poolq.jobs.context import JobContext
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.status.current_status import current_status
from poolq.products.batches.batch_files import FileNotFound, get_file, page
from poolq.products.batches.batch_layout import BATCH_ID, BatchLayout, new_batch_id
from poolq.products.batches.batch_prepare import EMPTY_FILE_CODE, empty_file_error
from poolq.products.batches.batch_records import BatchRecords, BatchRequest, CancelRequest, window_seconds
from poolq.products.batches.batch_view import batch_view
from poolq.products.batches.formats.endpoints import ENDPOINT_FORMATS
from poolq.products.batches.openai_objects import BatchObject, Page

log = logging.getLogger(__name__)


class BatchRejected(ValueError):
    """A create request naming something wrong: ``field`` says what, ``code`` which kind (OpenAI's ``code``)."""

    def __init__(self, field: str, message: str, code: str = "value_error") -> None:
        super().__init__(message)
        self.field, self.code = field, code


class BatchNotFound(LookupError):
    """No such batch, or another tenant's."""


class BatchAlreadyEnded(ValueError):
    """A cancel of a batch that has already ended."""


def create_batch(ctx: JobContext, tenant: str, input_file_id: str, endpoint: str, completion_window: str,
                 metadata: dict[str, str] | None, output_expires_after_s: int | None = None) -> BatchObject:
    if endpoint not in ENDPOINT_FORMATS:
        raise BatchRejected("endpoint", f"endpoint {endpoint!r} is not served in batches here; endpoints: "
                            f"{', '.join(ENDPOINT_FORMATS)}")
    try:
        window_seconds(completion_window)
    except ValueError as exc:
        raise BatchRejected("completion_window", str(exc)) from None
    try:
        input_file = get_file(ctx, tenant, input_file_id)
    except FileNotFound:
        raise BatchRejected("input_file_id", f"no file {input_file_id!r} (upload it with POST /v1/files)") from None
    if input_file.purpose != "batch":
        raise BatchRejected("input_file_id", f"file {input_file_id!r} has purpose {input_file.purpose!r}; a batch "
                            "reads a file uploaded with purpose 'batch'")
    if input_file.bytes == 0:  # known empty now: refused here rather than failed in a moment
        raise BatchRejected("input_file_id", empty_file_error(input_file_id).message, code=EMPTY_FILE_CODE)
    layout = BatchLayout(ctx.service_layout, tenant)
    request = BatchRequest(id=new_batch_id(), endpoint=endpoint, input_file_id=input_file_id,
                           completion_window=completion_window, created_at=int(time.time()), metadata=metadata,
                           output_expires_after_s=output_expires_after_s)
    BatchRecords(ctx, layout, request.id).write_once("batch.json", request)
    ctx.store.put(layout.active(request.id), b"")
    ctx.enqueuer.advance_batch(tenant, request.id)
    return get_batch(ctx, tenant, request.id, nudge=False)


def get_batch(ctx: JobContext, tenant: str, batch_id: str, nudge: bool = True) -> BatchObject:
    """The batch's status. ``nudge``: a batch waiting on a step of its own (reading its input,
    writing its files, stopping its job) gets it sent now rather than at the reconciler's next pass."""
    records = _records(ctx, tenant, batch_id)
    request = records.request()
    if request is None:
        raise BatchNotFound(batch_id)
    prepared = records.prepared()
    job = None
    if prepared is not None and prepared.job_id:
        job = current_status(JobHandle.of_tenant(ctx, prepared.job_id, tenant))
    view = batch_view(request, prepared, records.cancel(), records.outcome(), job, time.time())
    if nudge and view.status in ("validating", "finalizing", "cancelling"):
        ctx.enqueuer.advance_batch(tenant, batch_id)
    return view


def list_batches(ctx: JobContext, tenant: str, *, after: str | None = None, limit: int = 20) -> Page[BatchObject]:
    """The tenant's batches, newest first, those older than ``after`` (a batch id)."""
    prefix = BatchLayout(ctx.service_layout, tenant).batches_prefix
    ids = sorted({key[len(prefix):].split("/", 1)[0] for key in ctx.store.list(prefix)}, reverse=True)
    if after is not None:
        ids = [batch_id for batch_id in ids if batch_id < after]
    found: list[BatchObject] = []
    for batch_id in ids:
        try:
            found.append(get_batch(ctx, tenant, batch_id, nudge=False))
        except BatchNotFound:  # objects of a batch without its batch.json: skipped, the page still filled
            continue
        if len(found) > limit:
            break
    return page(found, limit)


def cancel_batch(ctx: JobContext, tenant: str, batch_id: str) -> BatchObject:
    """Ask the batch to stop: its job is cancelled; what it finished stays in the output file."""
    records = _records(ctx, tenant, batch_id)
    if records.request() is None:
        raise BatchNotFound(batch_id)
    if (outcome := records.outcome()) is not None:
        raise BatchAlreadyEnded(f"batch {batch_id} has already ended ({outcome.status})")
    records.write_once("cancel.json", CancelRequest(cancelling_at=int(time.time())))
    ctx.enqueuer.advance_batch(tenant, batch_id)
    return get_batch(ctx, tenant, batch_id, nudge=False)


def _records(ctx: JobContext, tenant: str, batch_id: str) -> BatchRecords:
    if not BATCH_ID.match(batch_id):
        raise BatchNotFound(batch_id)
    return BatchRecords(ctx, BatchLayout(ctx.service_layout, tenant), batch_id)
