"""The stack under test: ``LocalStack`` with its processes counted, extra environment, sized storage and extra workers."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from scalebench.s3_requests import counted_argv


def _log_says(path: Path, needle: bytes) -> bool:
    return path.exists() and needle in path.read_bytes()


def bench_stack_class():
    """``LocalStack`` whose API, worker and beat run through ``--counted`` (same commands otherwise),
    with extra environment (POOLQ_* settings, torch threads) and a SeaweedFS sized for the run."""
    from poolq.devtools.devstack.ports import ANY_PORT
    from poolq.devtools.devstack.process import spawn, stop_pid, wait_until
    from poolq.devtools.devstack.seaweed import SeaweedConfig
    from poolq.devtools.devstack.stack import LocalStack

    class BenchStack(LocalStack):
        def __init__(self, state_dir: Path, ports, *, env: dict[str, str], worker_env: dict[str, str],
                     counts_dir: Path, seaweed_volumes: int, start_timeout_s: float) -> None:
            super().__init__(state_dir, ports)
            self.extra_env, self.worker_env = env, worker_env
            self.counts_dir, self.seaweed_volumes, self.start_timeout_s = counts_dir, seaweed_volumes, start_timeout_s

        def env_for(self, state, worker: bool = False) -> dict[str, str]:
            return {**os.environ, **state.env(), **self.extra_env, **(self.worker_env if worker else {})}

        def _ready_call(self, pid: int, marker: str, ready, what: str, log_path: Path, interval: float):
            """A call that waits until ``ready()``; if that never comes, it stops ``pid`` first (its pid would be lost)."""
            def wait() -> None:
                try:
                    wait_until(ready, timeout=self.start_timeout_s, interval=interval, what=what, log_path=log_path,
                               pid=pid)
                except BaseException:
                    stop_pid(pid, expect_in_cmdline=marker)
                    raise
            return wait

        def _seaweed_config(self, state) -> SeaweedConfig:
            return dataclasses.replace(super()._seaweed_config(state), max_volumes=self.seaweed_volumes)

        def _start_api(self, state):  # (pid, a call that waits until it is ready), as LocalStack's
            port = state.ports["api"]
            if port != ANY_PORT:
                self._require_free(port, "the API")
            log_path = self.state_dir / "logs" / "api.log"
            argv = counted_argv("api", self.counts_dir, ["serve", "--host", "127.0.0.1", "--port", str(port)])
            pid = spawn(argv, log_path=log_path, pid_path=None, env=self.env_for(state))

            def ready() -> None:  # LocalStack's wait (it records the port the API got); stops the API if it fails
                try:
                    self._wait_api(state, pid, log_path, timeout=self.start_timeout_s)
                except BaseException:
                    stop_pid(pid, expect_in_cmdline="serve")
                    raise
            return pid, ready

        def start_worker(self, state, name: str, wait: bool = True) -> tuple[int, Path]:
            log_path = self.state_dir / "logs" / f"{name}.log"
            argv = counted_argv("worker", self.counts_dir,
                                ["worker", "--concurrency", "1", "--hostname", f"bench-{name}@%h"])
            pid = spawn(argv, log_path=log_path, pid_path=None, env=self.env_for(state, worker=True))
            if wait:
                self.wait_ready(pid, log_path, name)
            return pid, log_path

        def wait_ready(self, pid: int, log_path: Path, name: str) -> None:
            self._ready_call(pid, "worker", lambda: _log_says(log_path, b" ready."), name, log_path, 0.5)()

        def launch_workers(self, state, workers: int) -> list[tuple[int, Path]]:
            """Workers 2..``workers`` (the stack's own is 1), started without waiting: (pid, log) each."""
            return [self.start_worker(state, f"worker-{i}", wait=False) for i in range(2, workers + 1)]

        def wait_workers(self, launched: list[tuple[int, Path]]) -> None:
            for i, (pid, log_path) in enumerate(launched, start=2):
                self.wait_ready(pid, log_path, f"worker-{i}")

        def _start_worker(self, state):
            pid, log_path = self.start_worker(state, "worker", wait=False)
            return pid, lambda: self.wait_ready(pid, log_path, "worker")

        def _start_beat(self, state):
            log_path = self.state_dir / "logs" / "beat.log"
            pid = spawn(counted_argv("beat", self.counts_dir, ["beat"]), log_path=log_path, pid_path=None,
                        env=self.env_for(state))
            return pid, self._ready_call(pid, "beat", lambda: _log_says(log_path, b"beat: Starting"), "beat", log_path, 0.5)

    return BenchStack
