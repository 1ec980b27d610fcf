"""POOLQ_MAX_DOCUMENT_CHARS bounds uploaded records too: planning refuses a line over the byte bound
while reading it, and a text over the character limit once parsed, each as that record's error;
the records around them are planned, and shards read them back within the same bound."""
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.job_doubles import PLANNING, RecordingEnqueuer, drain
from support.oversize_inputs import MIB, jsonl, long_line_chunks, write_chunks

from poolq.jobs.inputs.shard_input import InputFields, ShardInput, read_shard_records
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.submit import submit_job
from poolq.worker.local_runner import local_context

MAX_CHARS = 1000  # a record may take 6 × 1000 + 1 MiB bytes as read
BEFORE = [{"id": "a", "text": "alpha"}]
AFTER = [{"id": "c", "text": "y" * (MAX_CHARS + 1)}, {"id": "d", "text": "y" * MAX_CHARS}]


def _plan(tmp_path, uri: str, task: dict | None = None):
    ctx = local_context(tmp_path / "out", Settings(max_document_chars=MAX_CHARS, shard_max_documents=1))
    ctx.enqueuer = RecordingEnqueuer()
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"uri": uri}, **(task or {})})).id
    drain(ctx, only=PLANNING)
    job = JobHandle.bind(ctx, job_id)
    errors = [json.loads(line) for line in ctx.store.get(job.layout.plan_errors).splitlines()]
    shards = [ShardInput.from_bytes(ctx.store.get(job.layout.shard_input(0, n))) for n in range(job.ledger.plan().num_shards)]
    return ctx, errors, shards


@pytest.mark.parametrize("compressed", [False, True], ids=["jsonl", "jsonl.gz"])
def test_an_oversize_line_and_a_text_over_the_limit_are_errors_and_the_rest_is_planned(tmp_path, compressed):
    path = write_chunks(tmp_path / ("in.jsonl.gz" if compressed else "in.jsonl"),
                        long_line_chunks(BEFORE, 2, AFTER, compressed=compressed))  # a 2 MiB line 2
    ctx, errors, shards = _plan(tmp_path, path.as_uri())
    assert [(e["line"], e["code"]) for e in errors] == [(2, "record_too_large"), (3, "text_too_long")]
    bound = 6 * MAX_CHARS + MIB
    assert errors[0]["message"].startswith(f"line 2: the line holds {2 * MIB + 27} bytes; a record may take at most "
                                           f"{bound} bytes (6 per character of POOLQ_MAX_DOCUMENT_CHARS=1000, plus {MIB})")
    assert errors[1]["message"] == ("line 3 (id 'c'): the text has 1001 characters; at most 1000 are accepted "
                                    "(POOLQ_MAX_DOCUMENT_CHARS)")
    # each shard was cut with the bound it is read back within, and reads back its records
    assert {(shard.limits.max_record_bytes, shard.limits.max_compression_ratio) for shard in shards} == {(bound, 100)}
    read = [read_shard_records(shard, InputFields(), ctx.settings.storage.s3_config()) for shard in shards]
    assert [{key: len(record.text) for key, record in records.items()} for records in read] == [{"a": 5}, {"d": MAX_CHARS}]


def test_a_parquet_cell_over_the_bound_is_an_error_naming_its_row(tmp_path):
    table = pa.table({"id": ["a", "big", "c"], "text": ["alpha", "x" * (2 * MIB), "gamma"]})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="none")
    (tmp_path / "in.parquet").write_bytes(sink.getvalue())
    ctx, errors, shards = _plan(tmp_path, (tmp_path / "in.parquet").as_uri())
    assert [(e["line"], e["code"]) for e in errors] == [(2, "record_too_large")]
    assert errors[0]["message"].startswith(f"row 2: its cells, decoded, take {2 * MIB + 3} bytes; a record may take at most")
    read = [read_shard_records(shard, InputFields(), ctx.settings.storage.s3_config()) for shard in shards]
    assert [sorted(records) for records in read] == [["a"], ["c"]]


def test_a_score_pairs_query_over_the_limit_is_an_error(tmp_path):
    pairs = [{"id": "p1", "query": "q", "text": "t"}, {"id": "p2", "query": "q" * (MAX_CHARS + 1), "text": "t"}]
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(jsonl(pairs))
    _, errors, _ = _plan(tmp_path, path.as_uri(), {"task": "score", "score_mode": "cosine"})
    assert [(e["line"], e["code"]) for e in errors] == [(2, "text_too_long")]
    assert "the query has 1001 characters" in errors[0]["message"]
