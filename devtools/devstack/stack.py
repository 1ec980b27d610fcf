"""`poolq dev up/status/down`: a local stack of real services that outlives the command.

Redis (AOF on) + SeaweedFS (S3) + the API (uvicorn) + one Celery worker + beat (the
reconciler and reindex schedules), all bound to
127.0.0.1. State, logs and pids live under one directory; `down` stops only what `up` started.

A port given as 0 (``ANY_PORT``) means any free one, with no race: the API binds port 0 itself
and we read back what it got; Redis and SeaweedFS are started on ports picked for them, and
again on fresh ones if another process took one first.  The ports each service got are in the
state file (``poolq dev status --json``), the one place to learn them.
"""
from __future__ import annotations

import os
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from poolq.devtools.devstack.ports import ANY_PORT, port_is_free, wait_listening_port
from poolq.devtools.devstack.private_files import private_dir, restrict_tree
from poolq.devtools.devstack.process import ServiceError, pid_alive, spawn, stop_pid, wait_until
from poolq.devtools.devstack.stack_registry import StackRegistry
from poolq.devtools.devstack.stack_state import StackState

# The servers' and the key store's modules (httpx, boto3, redis, the job settings) are imported
# where a service is started: `poolq dev status` and `down` only read the state file and signal
# pids, and a test suite runs them for every stack it starts.
if TYPE_CHECKING:
    from poolq.devtools.devstack.managed_server import ManagedServer
    from poolq.devtools.devstack.seaweed import SeaweedConfig
    from poolq.jobs import ApiKeyStore

# Services start a phase at a time, those of a phase together (the programs need the stores up);
# they stop in the reverse order, a phase at a time.
PHASES = (("redis", "seaweed"), ("api", "worker", "beat"))
SERVICES = tuple(name for phase in PHASES for name in phase)
# What each service's command line contains: `down` never signals a pid that lacks it.
CMDLINE_MARKERS = {"redis": "redis-server", "seaweed": "weed", "api": "serve", "worker": "worker", "beat": "beat"}
BUCKET = "poolq"
#: What the stack keeps in its state directory: its state file, logs, and each store's data.
STATE_ENTRIES = ("stack.json", "logs", "redis", "seaweed")
DEV_TENANT = "dev"


@dataclass(frozen=True)
class StackPorts:
    """The ports to start the services on; ``ANY_PORT`` (0): any free one."""

    redis: int = 6390
    s3: int = 8333
    api: int = 8000


class LocalStack:
    """A local stack rooted at ``state_dir`` (default ``./.poolq``), noted in the user's ``registry``
    while it runs (the CLI finds it there from any directory)."""

    def __init__(self, state_dir: Path, ports: StackPorts | None = None, registry: StackRegistry | None = None) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.ports = ports or StackPorts()
        self.state_path = self.state_dir / "stack.json"
        self.registry = registry or StackRegistry()

    # -- queries -------------------------------------------------------------------------
    def load(self) -> StackState | None:
        return StackState.load(self.state_path)

    def running(self, state: StackState) -> dict[str, bool]:
        """Which of the stack's services are alive (pid alive and still our program)."""
        return {name: _is_ours(state.pids.get(name), name) for name in SERVICES}

    # -- up / down -----------------------------------------------------------------------
    def up(self, log: Callable[[str], None] = print) -> tuple[StackState, list[str]]:
        """Start whatever is not running; returns the state and the services started now."""
        self._make_private()
        state = self.load() or self._new_state()
        alive = self.running(state)
        made = state.ensure_secrets()
        if made and any(alive.values()):
            raise ServiceError(f"this stack was started without {', '.join(made)} (an older poolq); "
                               f"stop it first: poolq dev down --dir {self.state_dir}")
        for name, port_name in (("redis", "redis"), ("seaweed", "s3"), ("api", "api")):
            if not alive[name] and state.ports[port_name] != ANY_PORT:  # check every port before starting anything
                self._require_free(state.ports[port_name], name)
        started = []
        for phase in PHASES:
            launched = []
            for name in phase:
                if alive[name]:
                    log(f"{name}: already running (pid {state.pids[name]})")
                    continue
                state.pids[name], ready = getattr(self, f"_start_{name}")(state)
                state.save(self.state_path)  # saved at once: `down` stops it even if it never gets ready
                launched.append((name, ready))
            for name, ready in launched:
                ready()
                state.save(self.state_path)  # with the port it got and its pid (a restart changes it)
                started.append(name)
                log(f"{name}: started (pid {state.pids[name]}) {self._where(name, state)}")
        if not state.api_key:
            state.api_key = self._create_dev_key(state)
        elif "key_signing_secret" in made:  # made before key records were signed: we made it, so we vouch for it
            self._key_store(state).resign(state.api_key.split("_")[1])
        state.save(self.state_path)
        self.registry.add(self.state_dir)
        # Secrets are never printed here (terminal scrollback, CI logs): `poolq dev status` shows them to the owner.
        log(f"dev API key (tenant {DEV_TENANT}, admin), Flower login and S3 keys: poolq dev status --dir {self.state_dir}")
        return state, started

    def down(self, only: list[str] | None = None) -> list[str]:
        """Stop the stack's services (or ``only`` those), in reverse start order, by pid."""
        state = self.load()
        if state is None:
            return []
        stopped = []
        for phase in reversed(PHASES):
            names = [name for name in reversed(phase)
                     if state.pids.get(name) is not None and (only is None or name in only)]
            with ThreadPoolExecutor(max_workers=len(phase)) as pool:  # each stop waits for its exit
                results = list(pool.map(lambda name: stop_pid(state.pids[name], expect_in_cmdline=CMDLINE_MARKERS[name]),
                                        names))
            stopped += [name for name, was_running in zip(names, results) if was_running]
            for name in names:
                state.pids.pop(name)
        state.save(self.state_path)
        if not any(self.running(state).values()):
            self.registry.remove(self.state_dir)
        return stopped

    def _make_private(self) -> None:
        """The state directory 0700, and what the stack keeps in it 0700 / 0600, also what an older
        version left open (only the stack's own entries: ``--dir`` may name a folder with other things)."""
        private_dir(self.state_dir)
        for name in STATE_ENTRIES:
            path = self.state_dir / name
            if path.is_dir():
                restrict_tree(path)
            elif path.is_file():
                path.chmod(0o600)

    @classmethod
    def _create_dev_key(cls, state: StackState) -> str:
        key, _ = cls._key_store(state).create(DEV_TENANT, admin=True, name="poolq dev up")
        return key

    @staticmethod
    def _key_store(state: StackState) -> ApiKeyStore:
        """The stack's key records, signed with its secret (its processes use the default prefix)."""
        from poolq.jobs import ApiKeyStore, Settings
        from poolq.storage import S3Config, S3ObjectStore, make_s3_client

        config = S3Config(state.s3_endpoint, state.access_key_id, state.secret_access_key)
        store = S3ObjectStore(make_s3_client(config), state.bucket, config)
        prefix = Settings.flat_fields()["output_prefix"].default
        return ApiKeyStore(store, prefix, signing_secret=state.key_signing_secret)

    # -- starting each service -------------------------------------------------------------
    def _new_state(self) -> StackState:
        state = StackState(
            state_dir=str(self.state_dir), api_url="", s3_endpoint="", bucket=BUCKET, redis_url="",
            access_key_id=f"poolq{secrets.token_hex(6)}", secret_access_key=secrets.token_urlsafe(30), ports={},
        )
        state.ensure_secrets()
        for name, port in (("redis", self.ports.redis), ("s3", self.ports.s3), ("api", self.ports.api)):
            state.use_port(name, port)  # 0 until the service has one
        return state

    @staticmethod
    def _where(name: str, state: StackState) -> str:
        return {"redis": state.redis_address, "seaweed": state.s3_endpoint, "api": state.api_url,
                "worker": "queues control,gpu,webhooks",
                "beat": "reconciler + schedules"}[name]

    def _require_free(self, port: int, service: str) -> None:
        if not port_is_free(port):
            raise ServiceError(f"port {port} on 127.0.0.1 is already in use; {service} cannot start there")

    # Each starter launches its service and returns its pid and a call that waits until it is ready
    # (and records the port the service got).
    def _start_redis(self, state: StackState) -> tuple[int, Callable[[], None]]:
        from poolq.devtools.devstack.redis_server import RedisConfig, RedisServer

        server = RedisServer(RedisConfig(data_dir=self.state_dir / "redis", port=state.ports["redis"],
                                         password=state.redis_password))
        return self._start_store(state, "redis", server, lambda: state.use_port("redis", server.config.port))

    def _seaweed_config(self, state: StackState) -> SeaweedConfig:
        from poolq.devtools.devstack.seaweed import SeaweedConfig

        return SeaweedConfig(
            data_dir=self.state_dir / "seaweed",
            s3_port=state.ports["s3"],
            access_key=state.access_key_id,
            secret_key=state.secret_access_key,
            bucket=state.bucket,
        )

    def _start_seaweed(self, state: StackState) -> tuple[int, Callable[[], None]]:
        from poolq.devtools.devstack.seaweed import SeaweedServer

        server = SeaweedServer(self._seaweed_config(state))
        pid, ready = self._start_store(state, "seaweed", server, lambda: state.use_port("s3", server.config.s3_port))

        def ready_with_bucket() -> None:
            ready()
            server.ensure_bucket()
        return pid, ready_with_bucket

    def _start_store(self, state: StackState, name: str, server: ManagedServer,
                     record_port: Callable[[], None]) -> tuple[int, Callable[[], None]]:
        """Start ``server``; its ready call starts it again on fresh ports if it lost one it was not
        given (the new pid is saved at once, so `down` finds it)."""
        pid = server.start()
        record_port()

        def restarted(new_pid: int) -> None:
            state.pids[name] = new_pid
            record_port()
            state.save(self.state_path)

        def ready() -> None:
            server.wait_ready_restarting(on_restart=restarted)
            record_port()
        return pid, ready

    def _start_api(self, state: StackState) -> tuple[int, Callable[[], None]]:
        port = state.ports["api"]
        if port != ANY_PORT:
            self._require_free(port, "the API")
        # `poolq serve`: logs in POOLQ_LOG_FORMAT (JSON by default), like a deployed API.
        argv = [sys.executable, "-m", "poolq.api", "serve", "--host", "127.0.0.1", "--port", str(port)]
        log_path = self.state_dir / "logs" / "api.log"
        pid = spawn(argv, log_path=log_path, pid_path=None, env={**os.environ, **state.env()})
        return pid, lambda: self._wait_api(state, pid, log_path, timeout=60)

    @staticmethod
    def _wait_api(state: StackState, pid: int, log_path: Path, timeout: float) -> None:
        """Wait until the API listens (on port 0 uvicorn binds one the kernel picks: the one it
        listens on is the one it got, so nobody can take it first) and answers /healthz."""
        state.use_port("api", wait_listening_port(pid, timeout, "the API", log_path=log_path))
        wait_until(lambda: _http_ok(f"{state.api_url}/healthz"), timeout=timeout, interval=0.1, what="the API",
                   log_path=log_path, pid=pid)

    def _start_worker(self, state: StackState) -> tuple[int, Callable[[], None]]:
        log_path = self.state_dir / "logs" / "worker.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        # `poolq worker`: a control worker and a compute worker under one supervisor; both say "ready."
        argv = [sys.executable, "-m", "poolq.api", "worker", "--hostname", f"poolq-dev-{int(time.time())}"]
        pid = spawn(argv, log_path=log_path, pid_path=None, env={**os.environ, **state.worker_env()})
        return pid, lambda: wait_until(lambda: _log_says(log_path, offset, b" ready.", times=2), timeout=120,
                                       interval=0.1, what="the workers", log_path=log_path, pid=pid)

    def _start_beat(self, state: StackState) -> tuple[int, Callable[[], None]]:
        log_path = self.state_dir / "logs" / "beat.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        argv = [sys.executable, "-m", "poolq.api", "beat"]
        pid = spawn(argv, log_path=log_path, pid_path=None, env={**os.environ, **state.worker_env()})
        return pid, lambda: wait_until(lambda: _log_says(log_path, offset, b"beat: Starting"), timeout=60, interval=0.1,
                                       what="beat", log_path=log_path, pid=pid)


def _is_ours(pid: int | None, name: str) -> bool:
    if pid is None or not pid_alive(pid):
        return False
    try:
        return CMDLINE_MARKERS[name] in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False


def _http_ok(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _log_says(path: Path, offset: int, needle: bytes, times: int = 1) -> bool:
    if not path.exists():
        return False
    with path.open("rb") as handle:
        handle.seek(offset)
        return handle.read().count(needle) >= times
