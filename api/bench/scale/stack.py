"""The stack under test: ``LocalStack`` with its processes counted, extra environment, sized storage and extra workers."""
from __future__ import annotations

import os
from pathlib import Path

from poolq.api.bench.scale.s3_requests import counted_argv


def _log_says(path: Path, needle: bytes) -> bool:
    return path.exists() and needle in path.read_bytes()


def _http_ok(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def bench_stack_class():
    """``LocalStack`` whose API, worker and beat run through ``--counted`` (same commands otherwise),
    with extra environment (POOLQ_* settings, torch threads) and a SeaweedFS sized for the run."""
    from poolq.api.devstack.process import spawn, stop_pid, wait_until
    from poolq.api.devstack.seaweed import SeaweedConfig, SeaweedServer
    from poolq.api.devstack.stack import LocalStack

    class BenchStack(LocalStack):
        def __init__(self, state_dir: Path, ports, *, env: dict[str, str], worker_env: dict[str, str],
                     counts_dir: Path, seaweed_volumes: int, start_timeout_s: float) -> None:
            super().__init__(state_dir, ports)
            self.extra_env, self.worker_env = env, worker_env
            self.counts_dir, self.seaweed_volumes, self.start_timeout_s = counts_dir, seaweed_volumes, start_timeout_s

        def env_for(self, state, worker: bool = False) -> dict[str, str]:
            return {**os.environ, **state.env(), **self.extra_env, **(self.worker_env if worker else {})}

        def _started(self, pid: int, marker: str, ready, what: str, log_path: Path, interval: float) -> int:
            """``pid`` once ``ready()``; if it never is, stop ``pid`` first (its pid would be lost)."""
            try:
                wait_until(ready, timeout=self.start_timeout_s, interval=interval, what=what, log_path=log_path, pid=pid)
            except BaseException:
                stop_pid(pid, expect_in_cmdline=marker)
                raise
            return pid

        def _start_seaweed(self, state) -> int:
            config = SeaweedConfig(data_dir=self.state_dir / "seaweed", s3_port=state.ports["s3"],
                                   access_key=state.access_key_id, secret_key=state.secret_access_key,
                                   bucket=state.bucket, max_volumes=self.seaweed_volumes)
            server = SeaweedServer(config)
            pid = server.start()
            server.wait_ready()
            server.ensure_bucket()
            return pid

        def _start_api(self, state) -> int:
            port = state.ports["api"]
            self._require_free(port, "the API")
            log_path = self.state_dir / "logs" / "api.log"
            argv = counted_argv("api", self.counts_dir, ["serve", "--host", "127.0.0.1", "--port", str(port)])
            pid = spawn(argv, log_path=log_path, pid_path=None, env=self.env_for(state))
            return self._started(pid, "serve", lambda: _http_ok(f"{state.api_url}/healthz"), "the API", log_path, 0.3)

        def start_worker(self, state, name: str, wait: bool = True) -> tuple[int, Path]:
            log_path = self.state_dir / "logs" / f"{name}.log"
            argv = counted_argv("worker", self.counts_dir,
                                ["worker", "--concurrency", "1", "--hostname", f"bench-{name}@%h"])
            pid = spawn(argv, log_path=log_path, pid_path=None, env=self.env_for(state, worker=True))
            if wait:
                self.wait_ready(pid, log_path, name)
            return pid, log_path

        def wait_ready(self, pid: int, log_path: Path, name: str) -> None:
            self._started(pid, "worker", lambda: _log_says(log_path, b" ready."), name, log_path, 0.5)

        def launch_workers(self, state, workers: int) -> list[tuple[int, Path]]:
            """Workers 2..``workers`` (the stack's own is 1), started without waiting: (pid, log) each."""
            return [self.start_worker(state, f"worker-{i}", wait=False) for i in range(2, workers + 1)]

        def wait_workers(self, launched: list[tuple[int, Path]]) -> None:
            for i, (pid, log_path) in enumerate(launched, start=2):
                self.wait_ready(pid, log_path, f"worker-{i}")

        def _start_worker(self, state) -> int:
            return self.start_worker(state, "worker")[0]

        def _start_beat(self, state) -> int:
            log_path = self.state_dir / "logs" / "beat.log"
            pid = spawn(counted_argv("beat", self.counts_dir, ["beat"]), log_path=log_path, pid_path=None,
                        env=self.env_for(state))
            return self._started(pid, "beat", lambda: _log_says(log_path, b"beat: Starting"), "beat", log_path, 0.5)

    return BenchStack
