"""Sending one webhook request: the interface, the real HTTP sender and an in-process one.

The real one connects to the address ``address_check`` pinned (never resolving the name again),
speaks HTTP/1.1 with the URL's host in ``Host`` and, for https, in SNI and the certificate check;
it has short connect and read deadlines, reads at most ``max_response_bytes`` of the answer, and
never follows a redirect (http.client does not: a 3xx is the answer).
"""
from __future__ import annotations

import http.client
import socket
import ssl
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from poolq.jobs.webhooks.webhook_url import IPAddress, WebhookUrl

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

    def post(self, url: WebhookUrl, address: IPAddress, headers: dict[str, str], body: bytes) -> Answer:
        connection = _connection(url, address, self.connect_timeout_s, self.read_timeout_s, self.tls)
        try:
            connection.request("POST", url.path, body=body, headers={**headers, "user-agent": USER_AGENT})
            response = connection.getresponse()
            excerpt = _read_capped(response, self.max_response_bytes, time.monotonic() + self.read_timeout_s)
            return Answer(response.status, response.getheader("location"), excerpt.decode("utf-8", "replace")[:200])
        finally:
            connection.close()


def _read_capped(response: http.client.HTTPResponse, cap: int, deadline: float) -> bytes:
    """At most ``cap`` bytes of the body, and no longer than until ``deadline`` (a receiver dripping
    bytes cannot hold the worker)."""
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
                tls: ssl.SSLContext | None) -> http.client.HTTPConnection:
    def open_socket() -> socket.socket:
        sock = socket.create_connection((str(address), url.port), timeout=connect_s)
        sock.settimeout(read_s)
        return sock

    if url.scheme == "https":
        return _PinnedHttps(url.host, url.port, open_socket, tls or ssl.create_default_context())
    return _PinnedHttp(url.host, url.port, open_socket)


class _PinnedHttp(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, open_socket: Callable[[], socket.socket]) -> None:
        super().__init__(host, port)
        self._open_socket = open_socket

    def connect(self) -> None:
        self.sock = self._open_socket()


class _PinnedHttps(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, open_socket: Callable[[], socket.socket], tls: ssl.SSLContext) -> None:
        super().__init__(host, port, context=tls)
        self._open_socket = open_socket

    def connect(self) -> None:
        self.sock = self._context.wrap_socket(self._open_socket(), server_hostname=self.host)  # type: ignore[attr-defined]


@dataclass
class InMemorySender(WebhookSender):
    """Answers with ``statuses`` in turn (the last one from then on) and keeps every request."""

    statuses: list[int] = field(default_factory=lambda: [200])
    requests: list[tuple[WebhookUrl, IPAddress, dict[str, str], bytes]] = field(default_factory=list)

    def post(self, url: WebhookUrl, address: IPAddress, headers: dict[str, str], body: bytes) -> Answer:
        self.requests.append((url, address, dict(headers), body))
        status = self.statuses[min(len(self.requests), len(self.statuses)) - 1]
        return Answer(status, "/elsewhere" if 300 <= status < 400 else None)
