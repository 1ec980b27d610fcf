"""A tenant's batch upload is read within the same bounds as a job's input: a line over the record limit
is that line's error (``record_too_large``), never held whole, and the other lines are answered."""
import io
import json

from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_status import LOCAL_TENANT
from poolq.products.batches.batch_advance import advance_batch
from poolq.products.batches.batch_files import create_file, open_file_content
from poolq.products.batches.batches import create_batch, get_batch
from poolq.worker.local_runner import local_context


def _line(custom_id: str, text: str) -> bytes:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/embeddings",
                       "body": {"model": "all-MiniLM-L6-v2", "input": text}}).encode() + b"\n"


def test_a_line_over_the_record_limit_is_its_own_error(tmp_path, minilm_engine):
    ctx = local_context(tmp_path / "out", Settings(max_document_chars=1000))  # lines of at most 6 x 1000 + 1 MiB bytes
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    content = _line("small", "a short text") + _line("huge", "x" * (2 << 20)) + _line("after", "another text")
    uploaded = create_file(ctx, LOCAL_TENANT, "in.jsonl", "batch", io.BytesIO(content), max_bytes=8 << 20)
    batch = create_batch(ctx, LOCAL_TENANT, uploaded.id, "/v1/embeddings", "24h", {})
    advance_batch(ctx, LOCAL_TENANT, batch.id)
    batch = get_batch(ctx, LOCAL_TENANT, batch.id, nudge=False)
    assert (batch.request_counts.completed, batch.request_counts.failed) == (2, 1), batch
    with open_file_content(ctx, LOCAL_TENANT, batch.error_file_id) as stream:
        errors = [json.loads(line) for line in stream.read().splitlines()]
    assert [error["response"]["body"]["error"]["code"] for error in errors] == ["record_too_large"]
    assert "line 2" in errors[0]["response"]["body"]["error"]["message"]
