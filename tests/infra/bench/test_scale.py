"""The scale benchmark (infra/bench/scale.py) end to end on a small corpus: the real local stack,
one worker, 100 documents. Checks the table's shape and that its numbers are sane; no timings
(what it measures needs no more: every column is counted on any job, one shard or many)."""
import os

import pytest
from conftest import BENCH_DIR
from scale import main, parse_args
from scalebench.report import COLUMNS

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _table(text: str) -> list[dict[str, str]]:
    """The first markdown table in ``text``, as one dict per row."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != len(header):
            break  # the next table
        rows.append(dict(zip(header, cells)))
    return rows


def _number(cell: str) -> float:
    return float(cell.replace(",", "").rstrip("%"))


def test_scale_benchmark_prints_every_column_with_sane_numbers(tmp_path, capsys):
    # Given 100 short documents and a stack with one worker, its torch threads this test process's share of
    # the cores (OMP_NUM_THREADS, which tests/conftest.py sets under xdist: 1; more would spin waiting)
    results = main(["--documents", "100", "--workers", "1", "--state-dir", str(tmp_path), "--timeout", "900"])

    # Then the job succeeded and the table has every column, with one row
    out = capsys.readouterr().out
    assert "machine:" in out and "cpu flags:" in out
    rows = _table(out)
    assert len(rows) == 1 and set(COLUMNS) <= set(rows[0]), out
    row = rows[0]
    assert row["status"] == "succeeded", out
    assert _number(row["documents"]) == 100 and _number(row["workers"]) == 1
    assert _number(row["docs/s"]) > 0
    assert _number(row["shards"]) >= 1
    assert _number(row["S3 PUT"]) > 0 and _number(row["S3 GET"]) > 0
    assert _number(row["S3 total"]) >= _number(row["S3 PUT"])
    for column in ("API MB", "worker MB", "beat MB", "redis MB", "weed MB", "redis peak MB", "peak keys"):
        assert _number(row[column]) > 0, column
    assert _number(row["shard-s"]) > 0
    assert 0 < _number(row["plan s"]) <= _number(row["e2e s"])

    # And the S3 requests were counted inside the server's processes, not only the upload
    (result,) = results
    assert result.completed == 100 and result.failed == 0
    assert result.s3_total(kinds=("worker",)) > 0 and result.s3_total(kinds=("api",)) > 0
    assert result.s3_total(("PutObject",), kinds=("worker",)) >= result.shards  # at least a part per shard

    # And nothing it started is left running
    from poolq.devtools.devstack.process import pid_alive

    assert set(result.pids) == {"api", "worker", "beat", "redis", "weed"}
    assert not [pid for pids in result.pids.values() for pid in pids if pid_alive(pid)]


@pytest.mark.parametrize("omp, argv, threads", [
    ("3", [], 3),  # the user's thread count
    ("3", ["--threads-per-worker", "2"], 2),  # the flag wins
    (None, ["--workers", "2"], max(1, len(os.sched_getaffinity(0)) // 2)),  # unset: the cores shared out
])
def test_each_worker_runs_the_threads_the_user_set(monkeypatch, omp, argv, threads):
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert parse_args(["--documents", "10", *argv]).threads_per_worker == threads


def test_a_thread_count_that_is_not_one_is_refused_naming_it(monkeypatch, capsys):
    monkeypatch.setenv("OMP_NUM_THREADS", "four")
    with pytest.raises(SystemExit):
        parse_args(["--documents", "10"])
    assert "OMP_NUM_THREADS='four'" in capsys.readouterr().err


def _processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line holds ``text`` (this machine's /proc)."""
    from pathlib import Path

    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_sigterm_stops_the_benchmark_and_its_whole_stack(tmp_path):
    # Given the benchmark running a job on its own stack (Redis, SeaweedFS, API, beat, a worker)
    import os
    import signal
    import subprocess
    import sys
    import time

    state = tmp_path / "state"
    bench = subprocess.Popen([sys.executable, str(BENCH_DIR / "scale.py"), "--documents", "20000", "--workers", "1",
                              "--state-dir", str(state), "--timeout", "900"],
                             stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        for line in bench.stderr:  # the job is running once planned
            if "planned:" in line:
                break
        assert len(_processes_mentioning(str(state))) >= 3  # its services name the state directory
        # When it is sent SIGTERM
        os.kill(bench.pid, signal.SIGTERM)
        bench.wait(timeout=120)
        # Then nothing of its stack is left running
        deadline = time.monotonic() + 30
        while _processes_mentioning(str(state)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _processes_mentioning(str(state)) == []
    finally:
        if bench.poll() is None:
            bench.kill()
        for pid in _processes_mentioning(str(state)):  # a failed check must not leave a stack behind
            os.kill(pid, signal.SIGKILL)
