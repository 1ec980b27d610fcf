"""Sending one webhook request: the interface, the real HTTP sender and an in-process one.

The real one connects to the address ``address_check`` pinned (never resolving the name again),
speaks HTTP/1.1 with the URL's host in ``Host`` and, for https, in SNI and the certificate check;
it has short connect and read deadlines, reads at most ``max_response_bytes`` of the answer, and
never follows a redirect (http.client does not: a 3xx is the answer). The whole request, TLS
handshake and answer included, ends ``connect_timeout_s + read_timeout_s`` after it began: a
socket's timeout bounds each wait for the next bytes, not a receiver that sends one byte just
before each runs out (``_Cutoff`` shuts the connection at the deadline).
"""
from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from poolq.products.webhooks.webhook_url import IPAddress, WebhookUrl

USER_AGENT = "poolq-webhooks/1"


@dataclass(frozen=True)
class Answer:
    status: int
    location: str | None = None  # a redirect's target (not followed)
    excerpt: str = ""  # the start of the body, for the outcome's error


class WebhookSender(ABC):
    @abstractmethod
    def post(self, url: WebhookUrl, address: IPAddress, headers: dict[str, str], body: bytes) -> Answer:
        """POST ``body`` to ``url`` at ``address``; OSError/HTTPException when no answer came."""


@dataclass(frozen=True)
class HttpSender(WebhookSender):
    connect_timeout_s: float
    read_timeout_s: float
    max_response_bytes: int
    tls: ssl.SSLContext | None = None  # None: the system's trusted CAs, hostnames checked

    @property
    def deadline_s(self) -> float:
        """The longest one request takes, from connecting to the end of the answer read."""
        return self.connect_timeout_s + self.read_timeout_s

    def post(self, url: WebhookUrl, address: IPAddress, headers: dict[str, str], body: bytes) -> Answer:
        deadline = time.monotonic() + self.deadline_s
        cutoff = _Cutoff(self.deadline_s)
        connection = _connection(url, address, self.connect_timeout_s, self.read_timeout_s, self.tls, cutoff)
        try:
            connection.request("POST", url.path, body=body, headers={**headers, "user-agent": USER_AGENT})
            response = connection.getresponse()
            if cutoff.fired:  # its head may be cut short ("HTTP/1.1 200 OK" reads as an answer): none came
                raise TimeoutError(self._late())
            excerpt = _read_capped(response, self.max_response_bytes, deadline)
            return Answer(response.status, response.getheader("location"), excerpt.decode("utf-8", "replace")[:200])
        except (OSError, http.client.HTTPException) as exc:
            if cutoff.fired and not isinstance(exc, TimeoutError):  # the cut connection's error says "closed"
                raise TimeoutError(self._late()) from exc
            raise
        finally:
            cutoff.cancel()
            connection.close()

    def _late(self) -> str:
        return f"no whole answer within {self.deadline_s:g} s (connect + read timeouts)"


class _Cutoff:
    """Shuts the request's socket down ``seconds`` after it was made: a read blocked on it returns at
    once (end of stream), so no receiver holds a delivery past its deadline."""

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        """``sock`` is now the request's socket (the TCP one, then the TLS one wrapping it)."""
        with self._lock:
            self._sock = sock
            if self.fired:
                _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._sock is not None:
                _shut(self._sock)


def _shut(sock: socket.socket) -> None:
    try:
        # The plain socket's shutdown, on a TLS socket too: it ends the descriptor's reads without
        # touching the TLS state another thread is reading through.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:  # closed already, or never connected
        pass


def _read_capped(response: http.client.HTTPResponse, cap: int, deadline: float) -> bytes:
    """At most ``cap`` bytes of the body, and no longer than until ``deadline`` (a receiver dripping
    bytes cannot hold the worker: what came by then is the excerpt)."""
    chunks: list[bytes] = []
    remaining = cap
    while remaining > 0 and time.monotonic() < deadline:
        chunk = response.read1(min(remaining, 8192))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _connection(url: WebhookUrl, address: IPAddress, connect_s: float, read_s: float,
                tls: ssl.SSLContext | None, cutoff: _Cutoff) -> http.client.HTTPConnection:
    def open_socket() -> socket.socket:
        sock = socket.create_connection((str(address), url.port), timeout=connect_s)
        sock.settimeout(read_s)
        cutoff.watch(sock)
        return sock

    if url.scheme == "https":
        return _PinnedHttps(url.host, url.port, open_socket, tls or ssl.create_default_context(), cutoff)
    return _PinnedHttp(url.host, url.port, open_socket)


class _PinnedHttp(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, open_socket: Callable[[], socket.socket]) -> None:
        super().__init__(host, port)
        self._open_socket = open_socket

    def connect(self) -> None:
        self.sock = self._open_socket()


class _PinnedHttps(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, open_socket: Callable[[], socket.socket], tls: ssl.SSLContext,
                 cutoff: _Cutoff) -> None:
        super().__init__(host, port, context=tls)
        self._open_socket = open_socket
        self._cutoff = cutoff

    def connect(self) -> None:
        tls = self._context  # type: ignore[attr-defined]
        sock = tls.wrap_socket(self._open_socket(), server_hostname=self.host, do_handshake_on_connect=False)
        self._cutoff.watch(sock)  # before the handshake: a receiver trickling it is cut off too
        self.sock = sock
        sock.do_handshake()


@dataclass
class InMemorySender(WebhookSender):
    """Answers with ``statuses`` in turn (the last one from then on) and keeps every request."""

    statuses: list[int] = field(default_factory=lambda: [200])
    requests: list[tuple[WebhookUrl, IPAddress, dict[str, str], bytes]] = field(default_factory=list)

    def post(self, url: WebhookUrl, address: IPAddress, headers: dict[str, str], body: bytes) -> Answer:
        self.requests.append((url, address, dict(headers), body))
        status = self.statuses[min(len(self.requests), len(self.statuses)) - 1]
        return Answer(status, "/elsewhere" if 300 <= status < 400 else None)
