"""An API key sent in the URL is refused (only the Authorization header counts), and never reaches
the access log: uvicorn logs the request target, query included, so ``poolq serve``'s logging
(``configure_logging``) redacts credentials from it. A real uvicorn, in a thread, as ``poolq serve``
runs it (``log_config=None``)."""
from __future__ import annotations

import json
import logging
import socket
import threading
import time

import httpx
import pytest
import uvicorn
from support.security_app import holding_context

from poolq.api.server.app import create_app
from poolq.jobs.observability.log_format import JsonFormatter, configure_logging, redact_url_secrets
from poolq.jobs.settings import Settings

_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "celery")


@pytest.fixture
def serve_logging(caplog):
    """``poolq serve``'s logging for the test (records also to caplog); every logger as it was afterwards."""
    root = logging.getLogger()
    saved_root = (root.handlers[:], root.level)
    saved = {name: (logger.handlers[:], logger.propagate, logger.filters[:])
             for name, logger in ((name, logging.getLogger(name)) for name in _LOGGERS)}
    configure_logging("json", "INFO")
    root.addHandler(caplog.handler)  # configure_logging replaced the root's handlers
    try:
        yield caplog
    finally:
        root.handlers[:], level = saved_root
        root.setLevel(level)
        for name, (handlers, propagate, filters) in saved.items():
            logger = logging.getLogger(name)
            logger.handlers[:], logger.propagate, logger.filters[:] = handlers, propagate, filters


def _serve(app) -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=True, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_a_key_in_the_query_string_is_refused_and_redacted_from_the_access_log(tmp_path, serve_logging):
    settings = Settings(store="local", local_store_root=tmp_path / "store", output_prefix="jobs")
    app = create_app(holding_context(settings), settings, checks=[])
    key, _ = app.state.keys.create("acme")
    server, thread, url = _serve(app)
    try:
        answers = [httpx.get(f"{url}/v1/jobs", params={"api_key": key, "limit": 5}, timeout=10),
                   httpx.get(f"{url}/v1/files", params={"token": key}, timeout=10),
                   httpx.get(f"{url}/v1/jobs/{key}", timeout=10)]
    finally:
        server.should_exit = True
        thread.join(30)
    assert [answer.status_code for answer in answers] == [401, 401, 401]
    records = [record for record in serve_logging.records if record.name == "uvicorn.access"]
    assert len(records) == 3, [record.getMessage() for record in serve_logging.records]
    lines = [JsonFormatter().format(record) for record in records]
    secret = key.split("_", 2)[2]
    assert not [line for line in lines if secret in line], lines
    messages = [json.loads(line)["message"] for line in lines]
    assert "GET /v1/jobs?api_key=[redacted]&limit=5 HTTP/1.1" in messages[0], messages
    assert "GET /v1/files?token=[redacted] HTTP/1.1" in messages[1] and "GET /v1/jobs/[redacted] HTTP/1.1" in messages[2]


@pytest.mark.parametrize("target, redacted", [
    ("/v1/jobs?limit=5&after=abc&order=asc", "/v1/jobs?limit=5&after=abc&order=asc"),
    ("/v1/jobs?key=k1&x=1", "/v1/jobs?key=[redacted]&x=1"),
    ("/v1/jobs?Access_Token=t#frag", "/v1/jobs?Access_Token=[redacted]#frag"),
    ("/v1/jobs?x-api-key=a;client_secret=b", "/v1/jobs?x-api-key=[redacted];client_secret=[redacted]"),
    ("/v1/jobs?q=pq_0123456789abcdef_AbC-_9", "/v1/jobs?q=[redacted]"),
])
def test_which_parts_of_a_url_are_redacted(target, redacted):
    assert redact_url_secrets(target) == redacted
