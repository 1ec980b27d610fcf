"""Webhook receivers that hold their connections, on one loopback port, for the isolation tests:
``/trickle`` answers one byte of its status line every 0.2 s for as long as the sender stays,
``/silent`` reads the request and never answers, ``/fast`` answers 200 at once. It counts the
connections held open at once on the stalling paths (a hang-up is seen at once: each handler waits
on its socket), and notes when each ``/fast`` request came."""
from __future__ import annotations

import select
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

STALLING = ("/trickle", "/silent")
TRICKLE = b"HTTP/1.1 200 OK\r\nx-trickle: " + b"." * 10_000


@dataclass
class StallingReceiver:
    port: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    open_now: int = 0
    most_open: int = 0  # the most stalling connections open at once
    stalled: int = 0  # stalling requests received in all
    fast: dict[str, float] = field(default_factory=dict)  # webhook-id -> when it came (time.time())
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _held(self, delta: int) -> None:
        with self.lock:
            self.open_now += delta
            self.most_open = max(self.most_open, self.open_now)
            self.stalled += max(delta, 0)

    def _stall(self, connection: socket.socket, trickle: bool) -> None:
        """Hold ``connection`` until the sender hangs up or the test ends (trickling, or silent)."""
        self._held(1)
        try:
            for byte in TRICKLE:
                if self.stop.is_set() or _hung_up(connection, 0.2):
                    return
                if trickle:
                    connection.sendall(bytes([byte]))
        except OSError:  # the sender cut it off
            pass
        finally:
            self._held(-1)


def _hung_up(connection: socket.socket, wait_s: float) -> bool:
    """The sender closed its end (within ``wait_s``): a readable socket with nothing left to read."""
    readable, _, _ = select.select([connection], [], [], wait_s)
    return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""


@contextmanager
def stalling_receiver() -> Iterator[StallingReceiver]:
    receiver = StallingReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.path in STALLING:
                receiver._stall(self.connection, trickle=self.path == "/trickle")
                self.close_connection = True
                return
            receiver.fast[self.headers.get("webhook-id", "")] = time.time()
            self.send_response(200)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield receiver
    finally:
        receiver.stop.set()
        server.shutdown()
        server.server_close()
