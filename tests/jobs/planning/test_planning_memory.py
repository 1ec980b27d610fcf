"""Planning's memory does not grow with the corpus: a 250k-line JSONL input and a 250k-row Parquet
input, cut into many sections, id partitions and row groups, plan under a fixed ceiling and grow by
less than the corpus's ids alone would take.

What planning holds is one section's line (or row group) and skip arrays, and one id partition:
sizes of the settings, not of the corpus. So the corpus is scaled down with them (sections of
2 MiB, partitions of 1 MiB instead of 64 and 16 MiB): 250k lines still span 8 sections and 16
partitions, as 1M lines span 4 and 16 at the defaults. Planning's growth past a warmed-up process
is measured against what one dict of the corpus's ids and content hashes takes (~48 MB), a bound
that scales with the corpus, where the README's absolute ceiling (kept too) is mostly imports.
Measured here: the JSONL planning grows 7 MB, 37 with one partition for the whole corpus (over
its bound); the Parquet one 20 MB in row groups of 5k rows, 74 in one row group of the corpus.
"""
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

CEILING_MB = 300  # README: "planner RSS under 300 MB whatever the corpus"
# README: a Parquet input's planning holds one row group at a time (pages of it, as pyarrow streams them):
# 1M rows in row groups of 100k peaked at 174 MB here (97 MB of it the imports, before planning began).
PARQUET_CEILING_MB = 250
DOCUMENTS = 250_000
# Sections and id partitions a 32nd and a 16th of their defaults: the 250k documents (15.6 MB of
# JSONL) span 8 sections and 16 partitions; the Parquet rows (50 row groups of 5k), 6 sections.
SETTINGS = {"plan_section_bytes": 2 << 20, "plan_partition_bytes": 1 << 20}

PLAN_IN_A_FRESH_PROCESS = r"""
import json, sys
from pathlib import Path
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_spec import JobSpec
from poolq.worker.local_runner import local_context
from poolq.jobs.settings import Settings
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.submit import submit_job
out, warm_up, corpus, tests, settings = sys.argv[1:]
sys.path.insert(0, tests)
from support.job_doubles import PLANNING, RecordingEnqueuer, drain

ctx = local_context(Path(out), Settings(**json.loads(settings)))
ctx.enqueuer = RecordingEnqueuer()
def plan(path):
    job_id = submit_job(ctx, JobSpec.model_validate({"input": {"uri": Path(path).as_uri()}})).id
    plan_job(JobHandle.bind(ctx, job_id))
    drain(ctx, only=PLANNING)  # the sections' tasks, here in this process: its peak covers each of them
    return job_id
def status_mb(field):  # this process's own (ru_maxrss would carry the forking parent's)
    line = next(l for l in open("/proc/self/status") if l.startswith(field + ":"))
    return int(line.split()[1]) / 1024
# A few records of the same format first: what planning imports and keeps whatever the input's
# size is resident before the measured run; then the peak (VmHWM) restarts from here (clear_refs 5).
plan(warm_up)
with open("/proc/self/clear_refs", "w") as handle:
    handle.write("5")
before = status_mb("VmRSS")
job_id = plan(corpus)
peak = status_mb("VmHWM")
job = JobHandle.bind(ctx, job_id)
planned = job.ledger.plan()
sections = json.loads(ctx.store.get(job.layout.planning_sections))
print(json.dumps({"sections": len(sections), "total": planned.total, "errors": planned.plan_errors, "shards": planned.num_shards,
                  "rss_before_mb": before, "peak_rss_mb": peak}))
"""


def _jsonl_corpus(path: Path, lines: int) -> Path:
    """``lines`` short documents, then the id of the 8th again."""
    with path.open("w") as handle:
        handle.writelines(json.dumps({"id": f"doc-{i:08d}", "text": f"short document number {i}"}) + "\n" for i in range(lines))
        handle.write(json.dumps({"id": "doc-00000007", "text": "a repeated id"}) + "\n")
    return path


def _parquet_corpus(path: Path, rows: int, row_group_rows: int) -> Path:
    """``rows`` short documents with integer ids, then the id 7 again, in row groups of ``row_group_rows``."""
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:  # written a row group at a time: the test holds no corpus
        for start in range(0, rows, row_group_rows):
            ids = list(range(start, min(rows, start + row_group_rows)))
            writer.write_table(pa.table({"id": ids, "text": [f"short document number {i}" for i in ids]}, schema=schema))
        writer.write_table(pa.table({"id": [7], "text": ["a repeated id"]}, schema=schema))
    return path


def _plan_in_a_fresh_process(tmp_path: Path, warm_up: Path, corpus: Path) -> dict:
    tests = str(Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-c", PLAN_IN_A_FRESH_PROCESS, str(tmp_path / "out"), str(warm_up), str(corpus),
                          tests, json.dumps(SETTINGS)], capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _held_mb(ids: list[str]) -> float:
    """What holding these ids and their content hashes (64 hex digits) in one dict takes."""
    held = dict.fromkeys(ids, "0" * 64)
    return (sys.getsizeof(held) + sum(sys.getsizeof(key) + sys.getsizeof(value) for key, value in held.items())) / 2**20


@pytest.mark.slow
def test_a_250k_line_input_in_8_sections_plans_in_bounded_memory_and_finds_its_duplicate(tmp_path):
    warm_up = _jsonl_corpus(tmp_path / "warm-up.jsonl", 10)
    result = _plan_in_a_fresh_process(tmp_path, warm_up, _jsonl_corpus(tmp_path / "corpus.jsonl", DOCUMENTS))
    assert (result["total"], result["errors"]) == (DOCUMENTS + 1, 1) and result["sections"] >= 8, result
    assert result["peak_rss_mb"] < CEILING_MB, result
    # One partition of every id (a planner holding the corpus's ids) grows past this bound: 37 MB
    held_mb = _held_mb([f"doc-{i:08d}" for i in range(DOCUMENTS)])
    assert result["peak_rss_mb"] - result["rss_before_mb"] < held_mb / 2, (result, held_mb)


@pytest.mark.slow
def test_a_250k_row_parquet_input_plans_in_bounded_memory_and_finds_its_duplicate(tmp_path):
    warm_up = _parquet_corpus(tmp_path / "warm-up.parquet", 10, 10)
    corpus = _parquet_corpus(tmp_path / "corpus.parquet", DOCUMENTS, DOCUMENTS // 50)
    assert pq.ParquetFile(corpus).metadata.num_row_groups == 51
    result = _plan_in_a_fresh_process(tmp_path, warm_up, corpus)
    assert (result["total"], result["errors"]) == (DOCUMENTS + 1, 1) and result["sections"] >= 3, result
    assert result["peak_rss_mb"] < PARQUET_CEILING_MB, result
    # A row group read holds ~1.3 KB per row of it (its pages, its rows as Python objects): the
    # bound is one whole dict of the ids, which reading the corpus as one row group exceeds by half (74 MB)
    held_mb = _held_mb([str(i) for i in range(DOCUMENTS)])
    assert result["peak_rss_mb"] - result["rss_before_mb"] < held_mb, (result, held_mb)
