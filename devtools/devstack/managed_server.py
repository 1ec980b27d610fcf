"""What every dev-stack server shares: a data dir with its log and pid file, stop by pid,
and use as a context manager (start, wait until ready, stop) in tests."""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Protocol

from poolq.devtools.devstack.process import pid_alive, process_cmdline, read_pid, stop_pid


class _HasDataDir(Protocol):
    # Read-only: the servers' configs are frozen dataclasses, and a server only reads its data dir.
    @property
    def data_dir(self) -> Path: ...


class ManagedServer(ABC):
    """One detached server process, tracked by ``<data_dir>/<name>.pid``."""

    #: Base name of the log and pid files in the data directory.
    file_stem: str

    def __init__(self, config: _HasDataDir, *, executable: str | None = None) -> None:
        """Manage the server described by ``config``; ``executable`` skips the lookup."""
        self.config = config
        self._executable = executable

    @property
    def log_path(self) -> Path:
        """The server's stdout and stderr."""
        return self.config.data_dir / f"{self.file_stem}.log"

    @property
    def pid_path(self) -> Path:
        """The file holding the server's pid while it runs."""
        return self.config.data_dir / f"{self.file_stem}.pid"

    @property
    @abstractmethod
    def _cmdline_marker(self) -> str:
        """What /proc/<pid>/cmdline of this server, and of no other, contains."""

    @abstractmethod
    def start(self) -> int:
        """Start the server detached; return its pid. Does not wait for it."""

    @abstractmethod
    def wait_ready(self) -> None:
        """Block until the server serves requests."""

    def prepare(self) -> None:
        """Set-up after the server is ready (nothing by default)."""

    def running_pid(self) -> int | None:
        """The pid of this server if its pid file names it, running."""
        pid = read_pid(self.pid_path)
        if pid is None or not pid_alive(pid):
            return None
        cmdline = process_cmdline(pid)
        return pid if cmdline is not None and self._cmdline_marker in cmdline else None

    def stop(self, timeout: float = 10) -> bool:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout``); return whether it ran."""
        pid = read_pid(self.pid_path)
        stopped = pid is not None and stop_pid(pid, expect_in_cmdline=self._cmdline_marker, timeout=timeout)
        self.pid_path.unlink(missing_ok=True)
        self._after_stop()
        return stopped

    def _after_stop(self) -> None:
        """Clean-up once the process is gone (nothing by default)."""

    def __enter__(self) -> "ManagedServer":
        self.start()
        try:
            self.wait_ready()
            self.prepare()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
