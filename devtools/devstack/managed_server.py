"""What every dev-stack server shares: a data dir with its log and pid file, ports chosen at start
(and chosen again when another process took one first), stop by pid, and use as a context manager
(start, wait until ready, stop) in tests."""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Callable, Generic, Protocol, Self, TypeVar

from poolq.devtools.devstack.ports import ANY_PORT, port_is_free
from poolq.devtools.devstack.private_files import private_dir, restrict_tree
from poolq.devtools.devstack.process import (
    PortInUse,
    ServiceError,
    log_tail,
    pid_alive,
    process_cmdline,
    read_pid,
    stop_pid,
    wait_until,
)

#: How many times in all a server is started when it keeps finding a port we chose for it taken.
PORT_ATTEMPTS = 5


class _ServerConfig(Protocol):
    # Read-only: the servers' configs are frozen dataclasses, and a server only reads them.
    @property
    def data_dir(self) -> Path: ...

    @property
    def host(self) -> str: ...


ConfigT = TypeVar("ConfigT", bound=_ServerConfig)


class ManagedServer(ABC, Generic[ConfigT]):
    """One detached server process, tracked by ``<data_dir>/<name>.pid``.

    Redis and SeaweedFS cannot bind port 0 and say which port they got, so ports asked for
    as ``ANY_PORT`` are picked here, free at that moment, when the server starts.  Another
    process may take one before the server binds it: the server then exits, or (weed) moves
    that listener elsewhere, and says so in its log.  :meth:`wait_ready_restarting` sees that
    and starts it again on fresh ports.  Ports the caller gave are never changed.
    """

    #: Base name of the log and pid files in the data directory.
    file_stem: str
    #: The program's name in messages.
    program: str
    #: What the server's log says (any case) when it could not bind one of its ports.
    bind_failure_markers: tuple[str, ...] = ("address already in use",)

    def __init__(self, config: ConfigT, *, executable: str | None = None) -> None:
        """Manage the server described by ``config``; ``executable`` skips the lookup."""
        self.config = config  # ANY_PORT replaced by the ports chosen, from the first start on
        self._requested = config  # as the caller gave it: what a fresh choice of ports starts from
        self._executable = executable
        self._log_offset = 0  # where this start's lines begin in the (appended) log

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
    def ports(self) -> list[int]:
        """Every TCP port the server listens on (``ANY_PORT`` for those not chosen yet)."""

    @abstractmethod
    def _with_fresh_ports(self, requested: ConfigT) -> ConfigT | None:
        """``requested`` with fresh free ports for those it leaves to us; None when it leaves none."""

    @abstractmethod
    def _spawn(self) -> int:
        """Start the configured server detached; return its pid."""

    @abstractmethod
    def wait_ready(self) -> None:
        """Block until the server serves requests; PortInUse when it could not bind a port."""

    def prepare(self) -> None:
        """Set-up after the server is ready (nothing by default)."""

    def start(self) -> int:
        """Start the server detached; return its pid.  Does not wait for it.

        Ports left to us are chosen at the first start; later starts (a restart after
        ``stop``) keep them, since clients know them by then.
        """
        if (pid := self.running_pid()) is not None:
            raise ServiceError(f"{self.program} for {self.config.data_dir} is already running (pid {pid})")
        if ANY_PORT in self.ports():
            self.config = self._with_fresh_ports(self._requested) or self.config
        for port in self.ports():
            if not port_is_free(port, self.config.host):
                raise ServiceError(f"port {port} on {self.config.host} is already in use; cannot start {self.program}")
        restrict_tree(private_dir(self.config.data_dir))  # its data and secrets are its owner's alone
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        return self._spawn()

    def wait_ready_restarting(self, on_restart: Callable[[int], None] = lambda pid: None) -> None:
        """:meth:`wait_ready`; when the server lost a port we chose to a quicker process, stop it
        and start it again on fresh ones (``PORT_ATTEMPTS`` starts in all).  ``on_restart`` gets
        each new pid.  Losing a port the caller gave is an error, as is running out of attempts."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self.wait_ready()
                return
            except PortInUse:
                self.stop()
                fresh = self._with_fresh_ports(self._requested)
                if fresh is None or attempt == PORT_ATTEMPTS:
                    raise
                self.config = fresh
                on_restart(self.start())

    def _wait(self, ready: Callable[[], bool], timeout: float, interval: float, what: str) -> None:
        """Poll ``ready`` while the server's process lives (see wait_until); PortInUse as soon as
        its log says it could not bind a port, whether it exited or moved that listener."""
        def settled() -> bool:
            self._raise_if_bind_failed(what)
            return ready()

        try:
            wait_until(settled, timeout, interval, what, log_path=self.log_path, pid=read_pid(self.pid_path))
        except PortInUse:
            raise
        except ServiceError:
            self._raise_if_bind_failed(what)  # it exited: for a taken port?
            raise

    def _raise_if_bind_failed(self, what: str) -> None:
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_offset)
                text = log.read().decode(errors="replace").lower()
        except FileNotFoundError:
            return
        if any(marker in text for marker in self.bind_failure_markers):
            raise PortInUse(f"{what} could not bind one of its ports {self.ports()} (another process took it first); "
                            f"see {self.log_path}{log_tail(self.log_path)}")

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

    def __enter__(self) -> Self:
        self.start()
        try:
            self.wait_ready_restarting()
            self.prepare()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
