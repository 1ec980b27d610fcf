"""Loopback TCP port helpers for the local dev stack.

Every dev-stack service binds 127.0.0.1 only, so these helpers probe that
address.  Note that :func:`free_port` is inherently racy (the port is released
before the service binds it); callers re-check with :func:`port_is_free` right
before starting a server and get a clear error if someone grabbed it meanwhile.
"""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port on ``host`` that nothing listens on right now.

    The kernel picks it (bind to port 0), so it comes from the ephemeral range.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """Tell whether a TCP listener could bind ``host:port`` now.

    ``SO_REUSEADDR`` is set, as servers (Redis, Go's net package) do, so a port
    that only has connections lingering in TIME_WAIT counts as free.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def port_is_listening(port: int, host: str = LOOPBACK, timeout: float = 0.2) -> bool:
    """Tell whether something accepts TCP connections on ``host:port``.

    Unlike :func:`port_is_free` this never binds, so it cannot steal the port
    from a server that is about to bind it.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
