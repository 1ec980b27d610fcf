"""Loopback TCP port helpers for the local dev stack.

Every dev-stack service binds 127.0.0.1 only, so these helpers probe that
address.  Note that :func:`free_port` is inherently racy (the port is released
before the service binds it, and another process may take it meanwhile).  So a
service asked for :data:`ANY_PORT` either binds port 0 itself (our uvicorn; the
port it got is read back with :func:`listening_ports`) or, for the external
servers that cannot, is started on a port picked here and started again on
fresh ports when it could not bind (see ``managed_server.ManagedServer``).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from poolq.devtools.devstack.process import wait_until

LOOPBACK = "127.0.0.1"
#: The port to ask for when any free port will do: the service reports the one it got.
ANY_PORT = 0
#: /proc/net/tcp's state column for a listening socket.
_TCP_LISTEN = "0A"


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


def listening_ports(pid: int) -> set[int]:
    """The TCP ports (IPv4 or IPv6) process ``pid`` listens on, read from /proc.

    What a server really bound, whatever it was asked for: how to learn the port of
    a server started on port 0, and how to tell our server from a stranger holding
    its port.  Empty when the process is gone.  Linux only.
    """
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:  # closed since the listing (short-lived connections)
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except OSError:  # gone (or never ours to read)
        return set()
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()  # sl local_address rem_address st ... inode
            if fields[3] == _TCP_LISTEN and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def wait_listening_port(pid: int, timeout: float, what: str, *, log_path: Path | None = None) -> int:
    """Wait until process ``pid`` listens on a TCP port and return that port (the lowest, if several).

    For a server told to bind port 0: the kernel chose, and this is how the caller learns
    what.  Fails at once if the process exits first, quoting ``log_path``.
    """
    found: list[int] = []

    def listening() -> bool:
        found[:] = sorted(listening_ports(pid))
        return bool(found)

    wait_until(listening, timeout, 0.05, f"{what} to listen", log_path=log_path, pid=pid)
    return found[0]
