"""A client that goes away in the middle of its request body is an everyday event, not a server
error: it is logged at INFO, without a traceback, in process and by a real uvicorn."""
import asyncio
import logging
import socket
import time
from urllib.parse import urlsplit

import pytest
from support.key_signing import TEST_KEY_SIGNING_SECRET
from support.security_app import holding_context, uvicorn_server

from poolq.api.server.app import create_app
from poolq.jobs.settings import Settings
from poolq.jobs.tenancy.api_keys import ApiKeyStore
from poolq.storage import LocalObjectStore

# (path, content type, the first bytes of a body announced as much longer)
CUT_BODIES = [
    ("/v1/jobs", "application/json", b'{"input": {"documents": [{"id": "a", "text": "'),
    ("/v1/jobs/validate", "application/json", b'{"input": {"documents": [{"id": "a", "text": "'),
    ("/v1/files", "multipart/form-data; boundary=XyZ",
     b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n\r\n{"custom_id": "a", '),
]
ANNOUNCED = 100_000


async def _cut_off(app, path: str, content_type: str, first: bytes, key: str) -> list[dict]:
    """Call ``app`` as a server would for a client that sends ``first`` and then disconnects."""
    headers = [(b"host", b"test"), (b"authorization", f"Bearer {key}".encode()),
               (b"content-type", content_type.encode()), (b"content-length", str(ANNOUNCED).encode())]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 50000), "server": ("test", 80)}
    messages = iter([{"type": "http.request", "body": first, "more_body": True}])
    sent: list[dict] = []

    async def receive() -> dict:
        return next(messages, {"type": "http.disconnect"})

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


@pytest.mark.parametrize("path, content_type, first", CUT_BODIES)
def test_a_body_cut_off_by_the_client_is_logged_at_info_without_a_traceback(tmp_path, caplog, path, content_type, first):
    settings = Settings(store="local", local_store_root=tmp_path / "store")
    app = create_app(holding_context(settings), settings, checks=[])
    key, _ = app.state.keys.create("acme")
    caplog.set_level(logging.DEBUG)
    asyncio.run(_cut_off(app, path, content_type, first, key))
    problems = [record for record in caplog.records if record.levelno >= logging.WARNING or record.exc_info]
    assert not problems, [(record.levelname, record.getMessage()) for record in problems]
    assert any(record.levelno == logging.INFO and "disconnected" in record.getMessage() and path in record.getMessage()
               for record in caplog.records), [record.getMessage() for record in caplog.records]
    assert app.state.ctx.status.active_ids("acme") == []  # nothing was submitted


@pytest.mark.integration
def test_a_real_server_logs_no_traceback_for_a_client_gone_mid_body(tmp_path):
    root = tmp_path / "store"
    key, _ = ApiKeyStore(LocalObjectStore(root), "jobs", signing_secret=TEST_KEY_SIGNING_SECRET).create("acme")
    env = {"POOLQ_STORE": "local", "POOLQ_LOCAL_STORE_ROOT": str(root), "POOLQ_OUTPUT_PREFIX": "jobs",
           "POOLQ_API_KEY_CACHE_S": "0"}
    log_path = tmp_path / "uvicorn.log"
    with uvicorn_server(env, log_path) as base_url:
        address = urlsplit(base_url)
        for path, content_type, first in CUT_BODIES:
            with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
                head = (f"POST {path} HTTP/1.1\r\nHost: {address.netloc}\r\nAuthorization: Bearer {key}\r\n"
                        f"Content-Type: {content_type}\r\nContent-Length: {ANNOUNCED}\r\n\r\n").encode()
                sock.sendall(head + first)
                time.sleep(0.5)  # the route is reading the body now
        time.sleep(1.5)
    log = log_path.read_text(errors="replace")
    assert "Traceback" not in log and "ClientDisconnect" not in log and "ERROR" not in log, log
