"""A batch's files where a request's job records straddle a shard boundary and the job is stopped
between its shards (by the batch's cancel, or by its token budget): the request is answered only if
every one of its records has a row, else it is one line of the error file; every request line is in
exactly one file and request_counts balance."""
import io
import json

from support.job_doubles import PLANNING, RecordingEnqueuer, drain, run_task

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.steps.shards.budget import stop_for_budget
from poolq.products.batches.batch_advance import advance_batch
from poolq.products.batches.batch_files import create_file, open_file_content
from poolq.products.batches.batches import cancel_batch, create_batch, get_batch
from poolq.storage import read_part

TENANT = "acme"


def _request(custom_id: str, texts: list[str]) -> bytes:
    body = {"model": "all-MiniLM-L6-v2", "input": texts if len(texts) > 1 else texts[0]}
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/embeddings", "body": body}).encode() + b"\n"


def _file_lines(ctx, file_id) -> list[dict]:
    if file_id is None:
        return []
    with open_file_content(ctx, TENANT, file_id) as stream:
        return [json.loads(line) for line in stream.read().splitlines()]


def _four_requests(local_ctx):
    """A batch of four requests whose job is cut into shards of 4 records: "split" holds records 2-4
    (shards 0 and 1). Its input is read and its job submitted; nothing of the job has run."""
    requests = [_request("a", ["first text"]), _request("b", ["second text"]),
                _request("split", ["third text", "fourth text", "fifth text"]), _request("c", ["sixth text"])]
    local_ctx.enqueuer = RecordingEnqueuer()
    uploaded = create_file(local_ctx, TENANT, "in.jsonl", "batch", io.BytesIO(b"".join(requests)), max_bytes=1 << 20)
    batch = create_batch(local_ctx, TENANT, uploaded.id, "/v1/embeddings", "24h", None)
    drain(local_ctx, only=frozenset({"batch"}))
    return batch


def test_a_request_split_across_a_cancelled_shard_boundary_is_one_error_line(local_ctx):
    # Given requests whose job records are cut into shards of 4: "split" holds records 2-4 (shards 0 and 1)
    batch = _four_requests(local_ctx)
    drain(local_ctx, only=PLANNING)
    shards = [task for task in local_ctx.enqueuer.tasks if task[0] == "shard"]
    assert len(shards) == 2
    # When shard 0 runs (two of "split"'s three records get rows), then the batch is cancelled
    local_ctx.enqueuer.tasks.remove(shards[0])
    run_task(shards[0], local_ctx)
    cancel_batch(local_ctx, TENANT, batch.id)
    drain(local_ctx, only=frozenset({"batch"}))  # the batch's step stops the job
    drain(local_ctx)  # shard 1 sees the cancel and never runs; the job is finalized
    advance_batch(local_ctx, TENANT, batch.id)
    batch = get_batch(local_ctx, TENANT, batch.id, nudge=False)
    # Then "a" and "b" are answered; "split" (one record never ran) and "c" are error lines, each once
    answered = [line["custom_id"] for line in _file_lines(local_ctx, batch.output_file_id)]
    unrun = [line["custom_id"] for line in _file_lines(local_ctx, batch.error_file_id)]
    assert batch.status == "cancelled"
    manifest = JobHandle.of_tenant(local_ctx, batch.poolq_job_id, TENANT).ledger.manifest()
    parts = [read_part(local_ctx.store.get(part.key), columns=["id"]) for part in manifest.parts]
    rows = [row_id for part in parts for row_id in part.column("id").to_pylist()]
    assert rows == ["1.0", "2.0", "3.0", "3.1"]  # the job embedded two of line 3's records, not its third
    assert answered == ["a", "b"] and unrun == ["split", "c"]
    counts = batch.request_counts
    assert (counts.total, counts.completed, counts.failed) == (4, 2, 2)


class _BudgetPassedInStep:
    """The real engine; its first step passes the job's token budget (as a shard's running tokens do)."""

    def __init__(self, inner, job) -> None:
        self.inner, self.job, self.steps = inner, job, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, requests, policy=None, **options):
        self.steps += 1
        if self.steps == 1:
            stop_for_budget(self.job)
        return self.inner.run(requests, policy, **options)


def test_a_batch_whose_job_reached_its_token_budget_fails_saying_so_and_answers_what_ran(local_ctx, minilm_engine):
    # Given a batch of four requests whose job is cut into shards of 4 records ("split" straddles them)
    batch = _four_requests(local_ctx)
    job = JobHandle.of_tenant(local_ctx, get_batch(local_ctx, TENANT, batch.id, nudge=False).poolq_job_id, TENANT)
    # When the first shard's step passes the job's token budget (the job stops as a cancel does)
    local_ctx.engines.use("all-MiniLM-L6-v2", _BudgetPassedInStep(minilm_engine, job))
    drain(local_ctx)
    advance_batch(local_ctx, TENANT, batch.id)
    batch = get_batch(local_ctx, TENANT, batch.id, nudge=False)
    # Then the batch failed naming the budget (it did not expire, nobody cancelled it); what ran is
    # answered, and every other request is one unrun line of the budget's code, never a 400 of its own
    assert job.ledger.manifest().status.value == "cancelled"
    assert batch.status == "failed" and [error.code for error in batch.errors.data] == ["token_limit_exceeded"]
    assert [line["custom_id"] for line in _file_lines(local_ctx, batch.output_file_id)] == ["a", "b"]
    unrun = _file_lines(local_ctx, batch.error_file_id)
    assert [(line["custom_id"], line["error"]["code"]) for line in unrun] == [
        ("split", "token_limit_exceeded"), ("c", "token_limit_exceeded")]
    counts = batch.request_counts
    assert (counts.total, counts.completed, counts.failed) == (4, 2, 2)
