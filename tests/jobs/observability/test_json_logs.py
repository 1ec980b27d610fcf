"""Structured logs: one JSON object per line carrying the job and shard a task works on; Celery
and ``poolq serve`` log through it; an API key never reaches a log line."""
import json
import logging
import threading
import time

import httpx
import pytest
import uvicorn
from celery import Celery
from celery.signals import setup_logging
from click.testing import CliRunner
from support.job_doubles import bindable_context

from poolq.jobs.coordination.enqueuer import PLAN_TASK, SHARD_TASK
from poolq.jobs.observability.log_format import JsonFormatter, configure_logging, log_context, use_celery_logging
from poolq.jobs.settings import Settings
from poolq.worker import celery_tasks as tasks_module

LOGGERS = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "celery")


@pytest.fixture
def restore_logging():
    """configure_logging changes process-wide loggers: put them back as they were."""
    saved = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).level, logging.getLogger(name).propagate)
             for name in LOGGERS}
    yield
    for name, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate
    setup_logging.disconnect(dispatch_uid="poolq-logging")


def test_lines_inside_log_context_carry_the_job_and_shard(json_lines):
    log = logging.getLogger("poolq.test")
    with log_context(job_id="a" * 32, shard=3, task="poolq.run_shard"):
        log.info("embedding %d records", 4)
        try:
            raise ValueError("multi\nline")
        except ValueError:
            log.exception("it failed")
    log.info("outside")
    lines = json_lines()
    assert len(lines) == 3  # one object per line, even with a traceback in it
    assert lines[0]["message"] == "embedding 4 records" and lines[0]["level"] == "INFO"
    assert {k: lines[0][k] for k in ("job_id", "shard", "task")} == {"job_id": "a" * 32, "shard": 3, "task": "poolq.run_shard"}
    assert lines[1]["job_id"] == "a" * 32 and "ValueError: multi" in lines[1]["exc"]
    assert "job_id" not in lines[2] and "shard" not in lines[2]


def test_a_task_body_logs_with_its_job_and_shard(json_lines, monkeypatch):
    app = Celery("poolq-test", broker="memory://")
    monkeypatch.setattr(tasks_module, "build_worker_context", lambda app, settings, *_: bindable_context())
    monkeypatch.setattr(tasks_module, "run_shard", lambda job, shard: logging.getLogger("jobs.x").info("working"))
    monkeypatch.setattr(tasks_module, "plan_job", lambda job: logging.getLogger("jobs.x").info("planning"))
    tasks_module.register_tasks(app, Settings())
    app.tasks[SHARD_TASK].apply(args=["b" * 32, 5], task_id="t-1")
    app.tasks[PLAN_TASK].apply(args=["c" * 32], task_id="t-2")
    working, planning = [line for line in json_lines() if line["logger"] == "jobs.x"]
    assert (working["job_id"], working["shard"], working["task"], working["task_id"]) == ("b" * 32, 5, SHARD_TASK, "t-1")
    assert (planning["job_id"], planning["task"], "shard" in planning) == ("c" * 32, PLAN_TASK, False)


def test_celery_logs_json_through_its_setup_logging_signal(restore_logging, capsys):
    use_celery_logging("json")
    receivers = setup_logging.send(sender=None, loglevel=logging.INFO, logfile=None, format="", colorize=False)
    assert receivers  # any receiver makes Celery skip installing its own handlers
    logging.getLogger("celery.worker").info("celery@host ready.")
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["message"] == "celery@host ready." and line["logger"] == "celery.worker"


def test_text_format_is_one_plain_line(restore_logging, capsys):
    configure_logging("text", "INFO")
    logging.getLogger("poolq.test").info("hello")
    assert capsys.readouterr().err.strip().endswith("INFO poolq.test: hello")


def test_poolq_serve_logs_json_and_keeps_uvicorns_hands_off(restore_logging, monkeypatch):
    from poolq.api.cli.main import main

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: calls.append(kwargs))
    result = CliRunner().invoke(main, ["serve", "--port", "8123"])
    assert result.exit_code == 0, result.output
    assert calls[0]["log_config"] is None and calls[0]["port"] == 8123
    assert isinstance(logging.getLogger().handlers[0].formatter, JsonFormatter)
    assert logging.getLogger("uvicorn.access").propagate is True


def test_an_api_key_never_reaches_the_logs(local_ctx, caplog, capsys):
    """Real uvicorn (access and error logs) at DEBUG, with requests that succeed, fail and are refused."""
    from poolq.api.server.app import create_app

    app = create_app(local_ctx, local_ctx.settings)
    key, _ = app.state.keys.create("local", admin=True)
    # port 0: the kernel picks one as uvicorn binds it (no other process can take it first)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, log_level="debug"))
    thread = threading.Thread(target=server.run, daemon=True)
    caplog.set_level(logging.DEBUG)
    thread.start()
    try:
        _wait_until(lambda: server.started, 10)
        port = server.servers[0].sockets[0].getsockname()[1]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as http:
            job = http.post("/v1/jobs", json={"input": {"documents": [{"id": "a", "text": "hello"}]}}).json()
            assert http.get(f"/v1/jobs/{job['id']}").json()["status"] == "succeeded"
            assert http.get("/v1/jobs/" + "0" * 32).status_code == 404
            assert http.post("/v1/jobs", content=b"{not json").status_code == 422
            assert http.get("/v1/jobs", headers={"Authorization": f"Bearer {key}x"}).status_code == 401
    finally:
        server.should_exit = True
        thread.join(10)
    captured = capsys.readouterr()
    assert any(record.name == "uvicorn.access" for record in caplog.records)  # the access log was on
    secret = key.split("_", 2)[2]  # pq_<key id>_<secret>: the secret itself may hold "_"
    for text in (caplog.text, captured.out, captured.err):
        assert key not in text and secret not in text


def _wait_until(probe, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
