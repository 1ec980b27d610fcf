"""Planning's memory does not grow with the corpus: a 1M-line JSONL input and a 1M-row Parquet
input plan under a fixed ceiling."""
import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

CEILING_MB = 300  # README: "planner RSS under 300 MB whatever the corpus"
# README: a Parquet input's planning holds one row group at a time (pages of it, as pyarrow streams them):
# 1M rows in row groups of 100k peaked at 174 MB here (97 MB of it the imports, before planning began).
PARQUET_CEILING_MB = 250

PLAN_IN_A_FRESH_PROCESS = r"""
import json, sys
from pathlib import Path
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_spec import JobSpec
from poolq.worker.local_runner import local_context
from poolq.jobs.settings import Settings
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.submit import submit_job
sys.path.insert(0, sys.argv[3])
from support.job_doubles import PLANNING, RecordingEnqueuer, drain

ctx = local_context(Path(sys.argv[1]), Settings(plan_section_bytes=16 << 20))  # several sections
ctx.enqueuer = RecordingEnqueuer()
job_id = submit_job(JobSpec.model_validate({"input": {"uri": Path(sys.argv[2]).as_uri()}}), ctx).id
def high_water_mb():  # VmHWM: this process's own peak (ru_maxrss would carry the forking parent's)
    line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
before = high_water_mb()
plan_job(JobHandle.bind(ctx, job_id))
drain(ctx, only=PLANNING)  # the sections' tasks, here in this process: its peak covers each of them
plan = JobHandle.bind(ctx, job_id).ledger.plan()
peak = high_water_mb()
sections = json.loads(ctx.store.get(JobHandle.bind(ctx, job_id).layout.planning_sections))
print(json.dumps({"sections": len(sections), "total": plan.total, "errors": plan.plan_errors, "shards": plan.num_shards,
                  "rss_before_mb": before, "peak_rss_mb": peak}))
"""


def _plan(tmp_path, lines: int) -> dict:
    corpus = tmp_path / f"corpus-{lines}.jsonl"
    with corpus.open("w") as handle:
        for i in range(lines):
            handle.write(json.dumps({"id": f"doc-{i:08d}", "text": f"short document number {i}"}) + "\n")
        handle.write(json.dumps({"id": "doc-00000007", "text": "a repeated id"}) + "\n")  # one duplicate
    return _plan_in_a_fresh_process(tmp_path, corpus, lines)


def _plan_in_a_fresh_process(tmp_path, corpus, lines: int) -> dict:
    tests = str(__import__("pathlib").Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-c", PLAN_IN_A_FRESH_PROCESS, str(tmp_path / f"out-{lines}"), str(corpus), tests],
                         capture_output=True, text=True, timeout=900, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_million_line_input_plans_under_the_ceiling_and_finds_its_duplicate(tmp_path):
    result = _plan(tmp_path, 1_000_000)
    assert (result["total"], result["errors"]) == (1_000_001, 1) and result["sections"] >= 3
    assert result["peak_rss_mb"] < CEILING_MB, result


def _parquet_corpus(tmp_path, rows: int, row_group_rows: int):
    """``rows`` short documents with integer ids, then the id 7 again, in row groups of ``row_group_rows``."""
    corpus = tmp_path / f"corpus-{rows}.parquet"
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    with pq.ParquetWriter(corpus, schema) as writer:  # written a row group at a time: the test holds no corpus
        for start in range(0, rows, row_group_rows):
            ids = list(range(start, min(rows, start + row_group_rows)))
            writer.write_table(pa.table({"id": ids, "text": [f"short document number {i}" for i in ids]}, schema=schema))
        writer.write_table(pa.table({"id": [7], "text": ["a repeated id"]}, schema=schema))
    return corpus


@pytest.mark.slow
def test_a_million_row_parquet_input_plans_under_the_ceiling_and_finds_its_duplicate(tmp_path):
    corpus = _parquet_corpus(tmp_path, 1_000_000, 100_000)
    assert pq.ParquetFile(corpus).metadata.num_row_groups == 11
    result = _plan_in_a_fresh_process(tmp_path, corpus, 1_000_000)
    assert (result["total"], result["errors"]) == (1_000_001, 1) and result["sections"] >= 3
    assert result["peak_rss_mb"] < PARQUET_CEILING_MB, result
