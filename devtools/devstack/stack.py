"""`poolq dev up/status/down`: a local stack of real services that outlives the command.

Redis (AOF on) + SeaweedFS (S3) + the API (uvicorn) + one Celery worker + beat (the
reconciler and reindex schedules), all bound to
127.0.0.1. State, logs and pids live under one directory; `down` stops only what `up` started.
"""
from __future__ import annotations

import os
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import httpx

from poolq.devtools.devstack.ports import port_is_free
from poolq.devtools.devstack.process import ServiceError, pid_alive, spawn, stop_pid, wait_until
from poolq.devtools.devstack.redis_server import RedisConfig, RedisServer
from poolq.devtools.devstack.seaweed import SeaweedConfig, SeaweedServer
from poolq.devtools.devstack.stack_state import StackState

# Services start a phase at a time, those of a phase together (the programs need the stores up);
# they stop in the reverse order, a phase at a time.
PHASES = (("redis", "seaweed"), ("api", "worker", "beat"))
SERVICES = tuple(name for phase in PHASES for name in phase)
# What each service's command line contains: `down` never signals a pid that lacks it.
CMDLINE_MARKERS = {"redis": "redis-server", "seaweed": "weed", "api": "serve", "worker": "worker", "beat": "beat"}
BUCKET = "poolq"
DEV_TENANT = "dev"


@dataclass(frozen=True)
class StackPorts:
    redis: int = 6390
    s3: int = 8333
    api: int = 8000


class LocalStack:
    """A local stack rooted at ``state_dir`` (default ``./.poolq``)."""

    def __init__(self, state_dir: Path, ports: StackPorts | None = None) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.ports = ports or StackPorts()
        self.state_path = self.state_dir / "stack.json"

    # -- queries -------------------------------------------------------------------------
    def load(self) -> StackState | None:
        return StackState.load(self.state_path)

    def running(self, state: StackState) -> dict[str, bool]:
        """Which of the stack's services are alive (pid alive and still our program)."""
        return {name: _is_ours(state.pids.get(name), name) for name in SERVICES}

    # -- up / down -----------------------------------------------------------------------
    def up(self, log: Callable[[str], None] = print) -> tuple[StackState, list[str]]:
        """Start whatever is not running; returns the state and the services started now."""
        state = self.load() or self._new_state()
        alive = self.running(state)
        for name, port_name in (("redis", "redis"), ("seaweed", "s3"), ("api", "api")):
            if not alive[name]:  # check every port before starting anything
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
                started.append(name)
                log(f"{name}: started (pid {state.pids[name]}) {self._where(name, state)}")
        if not state.api_key:
            state.api_key = self._create_dev_key(state)
            state.save(self.state_path)
        log(f"dev API key (tenant {DEV_TENANT}, admin): {state.api_key}")
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
        return stopped

    @staticmethod
    def _create_dev_key(state: StackState) -> str:
        from poolq.jobs import ApiKeyStore
        from poolq.storage import S3Config, S3ObjectStore, make_s3_client

        config = S3Config(state.s3_endpoint, state.access_key_id, state.secret_access_key)
        store = S3ObjectStore(make_s3_client(config), state.bucket, config)
        from poolq.jobs import Settings

        prefix = Settings.model_fields["output_prefix"].default  # the stack's processes use the default
        key, _ = ApiKeyStore(store, prefix).create(DEV_TENANT, admin=True, name="poolq dev up")
        return key

    # -- starting each service -------------------------------------------------------------
    def _new_state(self) -> StackState:
        ports = self.ports
        return StackState(
            state_dir=str(self.state_dir),
            api_url=f"http://127.0.0.1:{ports.api}",
            s3_endpoint=f"http://127.0.0.1:{ports.s3}",
            bucket=BUCKET,
            redis_url=f"redis://127.0.0.1:{ports.redis}/0",
            access_key_id=f"poolq{secrets.token_hex(6)}",
            secret_access_key=secrets.token_urlsafe(30),
            ports={"redis": ports.redis, "s3": ports.s3, "api": ports.api},
        )

    @staticmethod
    def _where(name: str, state: StackState) -> str:
        return {"redis": state.redis_url, "seaweed": state.s3_endpoint, "api": state.api_url, "worker": "queues control,gpu",
                "beat": "reconciler + schedules"}[name]

    def _require_free(self, port: int, service: str) -> None:
        if not port_is_free(port):
            raise ServiceError(f"port {port} on 127.0.0.1 is already in use; {service} cannot start there")

    # Each starter launches its service and returns its pid and a call that waits until it is ready.
    def _start_redis(self, state: StackState) -> tuple[int, Callable[[], None]]:
        server = RedisServer(RedisConfig(data_dir=self.state_dir / "redis", port=state.ports["redis"]))
        return server.start(), server.wait_ready

    def _seaweed_config(self, state: StackState) -> SeaweedConfig:
        return SeaweedConfig(
            data_dir=self.state_dir / "seaweed",
            s3_port=state.ports["s3"],
            access_key=state.access_key_id,
            secret_key=state.secret_access_key,
            bucket=state.bucket,
        )

    def _start_seaweed(self, state: StackState) -> tuple[int, Callable[[], None]]:
        server = SeaweedServer(self._seaweed_config(state))

        def ready() -> None:
            server.wait_ready()
            server.ensure_bucket()
        return server.start(), ready

    def _start_api(self, state: StackState) -> tuple[int, Callable[[], None]]:
        port = state.ports["api"]
        self._require_free(port, "the API")
        # `poolq serve`: logs in POOLQ_LOG_FORMAT (JSON by default), like a deployed API.
        argv = [sys.executable, "-m", "poolq.api", "serve", "--host", "127.0.0.1", "--port", str(port)]
        log_path = self.state_dir / "logs" / "api.log"
        pid = spawn(argv, log_path=log_path, pid_path=None, env={**os.environ, **state.env()})
        return pid, lambda: wait_until(lambda: _http_ok(f"{state.api_url}/healthz"), timeout=60, interval=0.3,
                                       what="the API", log_path=log_path)

    def _start_worker(self, state: StackState) -> tuple[int, Callable[[], None]]:
        log_path = self.state_dir / "logs" / "worker.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        argv = [sys.executable, "-m", "poolq.api", "worker", "--hostname", f"poolq-dev-{int(time.time())}@%h"]
        pid = spawn(argv, log_path=log_path, pid_path=None, env={**os.environ, **state.env()})
        return pid, lambda: wait_until(lambda: _log_says(log_path, offset, b" ready."), timeout=120, interval=0.5,
                                       what="the worker", log_path=log_path)

    def _start_beat(self, state: StackState) -> tuple[int, Callable[[], None]]:
        log_path = self.state_dir / "logs" / "beat.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        argv = [sys.executable, "-m", "poolq.api", "beat"]
        pid = spawn(argv, log_path=log_path, pid_path=None, env={**os.environ, **state.env()})
        return pid, lambda: wait_until(lambda: _log_says(log_path, offset, b"beat: Starting"), timeout=60, interval=0.5,
                                       what="beat", log_path=log_path)


def _is_ours(pid: int | None, name: str) -> bool:
    if pid is None or not pid_alive(pid):
        return False
    try:
        return CMDLINE_MARKERS[name] in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False


def _http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _log_says(path: Path, offset: int, needle: bytes) -> bool:
    if not path.exists():
        return False
    with path.open("rb") as handle:
        handle.seek(offset)
        return needle in handle.read()
