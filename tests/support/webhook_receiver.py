"""A real HTTP receiver on a loopback port for the webhook tests: it answers with the statuses it
is given (the last one from then on), keeps every request, and checks each one's signature with
the Standard Webhooks reference library (``standardwebhooks``), not poolq's own code."""
from __future__ import annotations

import ssl
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    verified: bool | None  # None: no secret given to check it with


@dataclass
class Receiver:
    statuses: list[int] = field(default_factory=lambda: [200])
    secret: str | None = None  # whsec_...: what the tenant's receiver verifies with
    requests: list[Received] = field(default_factory=list)
    port: int = 0

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("content-length", 0)))
        headers = {name.lower(): value for name, value in handler.headers.items()}
        verified = None
        if self.secret is not None:
            try:
                Webhook(self.secret).verify(body, headers)
                verified = True
            except WebhookVerificationError:
                verified = False
        self.requests.append(Received(handler.path, headers, body, verified))
        status = self.statuses[min(len(self.requests), len(self.statuses)) - 1]
        handler.send_response(status)
        if 300 <= status < 400:
            handler.send_header("location", self.url("/redirected"))
        handler.send_header("content-length", "2")
        handler.end_headers()
        handler.wfile.write(b"ok")


def serve(receiver: Receiver, tls: ssl.SSLContext | None = None):
    """Start ``receiver`` on a free loopback port (HTTPS with ``tls``); returns the server (``shutdown()`` it)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            receiver._answer(self)

        def do_GET(self) -> None:  # noqa: N802
            receiver._answer(self)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    receiver.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver served on a loopback port for the ``with`` block (a fixture's body)."""
    receiver = Receiver()
    server = serve(receiver)
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
