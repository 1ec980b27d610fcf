"""`poolq logs JOB` over a stack's log files: the job's lines from every file, in time order; the
access log's mentions only with --all; a job no line names is exit 4."""
import json

from click.testing import CliRunner

from poolq.api.cli.main import main

JOB, OTHER = "a" * 32, "b" * 32


def _line(ts: str, message: str, **fields) -> str:
    return json.dumps({"ts": f"2026-01-01T00:00:{ts}+00:00", "level": "INFO", "logger": "x", "message": message,
                       **fields}) + "\n"


def _logs(tmp_path):
    logs = tmp_path / "stack" / "logs"
    logs.mkdir(parents=True)
    (logs / "api.log").write_text(_line("01.000", f"job {JOB}: submitted", job_id=JOB, event="job_submitted")
                                  + _line("02.000", f'127.0.0.1:1 - "GET /v1/jobs/{JOB} HTTP/1.1" 200')
                                  + _line("02.500", f"job {OTHER}: submitted", job_id=OTHER, event="job_submitted"))
    (logs / "worker.log").write_text(_line("01.500", f"job {JOB}: planned", job_id=JOB, event="job_planned")
                                     + "Traceback (most recent call last):\n"
                                     + _line("03.000", f"job {JOB}: succeeded", job_id=JOB, event="job_finished"))
    return tmp_path / "stack"


def _run(*args):
    return CliRunner().invoke(main, ["logs", *args], env={"POOLQ_DEV_DIR": None, "POOLQ_STACK": None})


def test_the_jobs_lines_in_time_order_across_files(tmp_path):
    stack = _logs(tmp_path)
    shown = _run(JOB, "--dir", str(stack))
    assert shown.exit_code == 0, shown.output
    assert [line.split(" ", 1)[1] for line in shown.output.splitlines()] == [
        f"api    INFO    job {JOB}: submitted", f"worker INFO    job {JOB}: planned", f"worker INFO    job {JOB}: succeeded"]
    as_json = [json.loads(line) for line in _run(JOB, "--dir", str(stack), "--json").output.splitlines()]
    assert [line["event"] for line in as_json] == ["job_submitted", "job_planned", "job_finished"]
    every = _run(JOB, "--dir", str(stack), "--all").output
    assert "GET /v1/jobs/" in every and OTHER not in every and len(every.splitlines()) == 4


def test_no_line_or_no_logs_is_an_error(tmp_path):
    stack = _logs(tmp_path)
    assert _run("c" * 32, "--dir", str(stack)).exit_code == 4
    missing = _run(JOB, "--dir", str(tmp_path / "nowhere"))
    assert missing.exit_code == 2 and "no logs under" in missing.output
