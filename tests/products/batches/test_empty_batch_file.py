"""An input file without a request line: refused when the batch is created if the file has no bytes,
else the batch ends ``failed`` with OpenAI's ``empty_file`` error, never with ``errors: null``."""
import io

import pytest

from poolq.products.batches.batch_advance import advance_batch
from poolq.products.batches.batch_files import create_file
from poolq.products.batches.batches import BatchRejected, create_batch, get_batch

TENANT = "acme"


def _upload(ctx, content: bytes) -> str:
    return create_file(ctx, TENANT, "in.jsonl", "batch", io.BytesIO(content), max_bytes=1 << 20).id


def test_a_file_of_blank_lines_fails_the_batch_with_the_empty_file_error(local_ctx):
    file_id = _upload(local_ctx, b"\n  \n\t\n")
    batch = create_batch(local_ctx, TENANT, file_id, "/v1/embeddings", "24h", None)  # its steps run inline
    advance_batch(local_ctx, TENANT, batch.id)
    batch = get_batch(local_ctx, TENANT, batch.id, nudge=False)
    assert batch.status == "failed" and batch.failed_at is not None and batch.poolq_job_id is None
    assert batch.errors is not None and batch.errors.object == "list"
    [error] = batch.errors.data
    assert (error.code, error.line, error.param) == ("empty_file", None, "input_file_id")
    assert file_id in error.message and "no request line" in error.message
    assert (batch.request_counts.total, batch.output_file_id, batch.error_file_id) == (0, None, None)


def test_a_file_of_no_bytes_is_refused_when_the_batch_is_created(local_ctx):
    file_id = _upload(local_ctx, b"")
    with pytest.raises(BatchRejected) as refused:
        create_batch(local_ctx, TENANT, file_id, "/v1/embeddings", "24h", None)
    assert (refused.value.field, refused.value.code) == ("input_file_id", "empty_file")
    assert file_id in str(refused.value) and "no request line" in str(refused.value)
