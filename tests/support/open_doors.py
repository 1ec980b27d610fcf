"""Probes a local process with no credentials can make against a server's ports: what it can read,
write or talk to. Each answers whether the door is open; a test asserts every one is shut."""

from __future__ import annotations

import socket
import ssl

import httpx

#: HTTP/2's client preface and an empty SETTINGS frame: what a gRPC client sends first.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS_FRAME_TYPE = 4


def _answers_with_h2_settings(sock: socket.socket) -> bool:
    """Send the HTTP/2 preface; True if the peer answers with a SETTINGS frame (it speaks gRPC to us)."""
    try:
        sock.sendall(_H2_PREFACE)
        header = b""
        while len(header) < 9:
            chunk = sock.recv(9 - len(header))
            if not chunk:
                return False
            header += chunk
    except (OSError, ssl.SSLError):
        return False
    return header[3] == _SETTINGS_FRAME_TYPE


def speaks_plain_grpc(port: int) -> bool:
    """Whether ``port`` serves HTTP/2 (gRPC) in the clear to anyone."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
            return _answers_with_h2_settings(sock)
    except OSError:
        return False


def serves_tls_without_a_client_certificate(port: int) -> bool:
    """Whether ``port`` speaks HTTP/2 over TLS to a client that presents no certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as raw:
            with context.wrap_socket(raw) as sock:
                return _answers_with_h2_settings(sock)
    except (OSError, ssl.SSLError):
        return False


def http_get(port: int, path: str) -> httpx.Response | None:
    """A plain GET, no credentials; None when the port does not answer HTTP (closed, TLS, gRPC)."""
    try:
        return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5)
    except httpx.HTTPError:
        return None


def http_put(port: int, path: str, body: bytes) -> httpx.Response | None:
    try:
        return httpx.put(f"http://127.0.0.1:{port}{path}", content=body, timeout=5)
    except httpx.HTTPError:
        return None
