"""Listing batches: newest first by cursor, each page full while batches remain."""
import io
import time

from support.job_doubles import RecordingEnqueuer

from poolq.jobs.settings import Settings
from poolq.products.batches.batch_files import create_file
from poolq.products.batches.batch_layout import BatchLayout, new_batch_id
from poolq.products.batches.batches import create_batch, list_batches
from poolq.worker.local_runner import local_context

TENANT = "acme"
REQUEST = b'{"custom_id": "a", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}\n'


def test_a_batch_without_its_record_leaves_the_page_full_and_has_more_true(tmp_path):
    # Given three batches, and newer than them objects of a batch whose batch.json is not there
    ctx = local_context(tmp_path / "out", Settings())
    ctx.enqueuer = RecordingEnqueuer()
    uploaded = create_file(ctx, TENANT, "in.jsonl", "batch", io.BytesIO(REQUEST), max_bytes=1 << 20)
    made = []
    for _ in range(3):
        made.append(create_batch(ctx, TENANT, uploaded.id, "/v1/embeddings", "24h", None).id)
        time.sleep(0.002)  # batch ids count milliseconds: each later one sorts after
    recordless = new_batch_id()
    ctx.store.put(BatchLayout(ctx.service_layout, TENANT).batch_record(recordless, "prepared.json"), b"{}")
    # When a client lists two at a time
    first = list_batches(ctx, TENANT, limit=2)
    rest = list_batches(ctx, TENANT, limit=2, after=first.last_id)
    # Then the first page holds two batches and says more follow; the walk sees each batch once
    assert [batch.id for batch in first.data] == [made[2], made[1]] and first.has_more
    assert [batch.id for batch in rest.data] == [made[0]] and not rest.has_more
