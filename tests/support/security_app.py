"""An API app over a local store whose jobs are accepted and never run, and a real uvicorn
serving it in a subprocess: for tests that need real HTTP (streamed bodies, server logs).

``uvicorn support.security_app:create_app_from_env --factory`` builds the app from POOLQ_*
env (``POOLQ_LOCAL_STORE_ROOT`` names the store; keys are created there by the test process).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

from poolq.api.server.app import create_app
from poolq.devtools.devstack.ports import wait_listening_port
from poolq.devtools.devstack.process import ServiceError
from poolq.jobs.context import JobContext, build_context
from poolq.jobs.coordination.enqueuer import Enqueuer
from poolq.jobs.settings import Settings
from poolq.products.job_hooks import ProductHooks

REPO_ROOT = Path(__file__).resolve().parents[2]


class HoldingEnqueuer(Enqueuer):
    """Accepts work and never runs it: jobs stay queued."""

    def plan(self, job_id: str) -> None: ...
    def plan_section(self, job_id: str, stage: str, section: int) -> None: ...
    def run_shard(self, job_id: str, shard: int) -> None: ...
    def finalize(self, job_id: str) -> None: ...


def holding_context(settings: Settings) -> JobContext:
    """A context over ``settings``' (local) store, in-memory status, and nothing ever running."""
    return build_context(settings, HoldingEnqueuer(), hooks=ProductHooks())


def create_app_from_env():
    """The uvicorn factory: POOLQ_* env, a local store, no Redis, no worker."""
    settings = Settings()
    if settings.storage.store != "local":
        raise RuntimeError("set POOLQ_STORE=local and POOLQ_LOCAL_STORE_ROOT")
    return create_app(holding_context(settings), settings, checks=[])


@contextmanager
def uvicorn_server(env: dict[str, str], log_path: Path, *extra_args: str) -> Iterator[str]:
    """Serve ``create_app_from_env`` with a real uvicorn on a free loopback port; yields its base URL.
    stdout and stderr (access log included) go to ``log_path``. uvicorn binds port 0 itself: the
    port it listens on is the one it got, which no other process could take first."""
    argv = [sys.executable, "-m", "uvicorn", "support.security_app:create_app_from_env", "--factory",
            "--host", "127.0.0.1", "--port", "0", *extra_args]
    pythonpath = os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    with log_path.open("wb") as log:
        process = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONPATH": pythonpath, **env})
    try:
        deadline = time.monotonic() + 60
        try:
            port = wait_listening_port(process.pid, 60, "uvicorn", log_path=log_path)
        except ServiceError as exc:
            raise RuntimeError(f"uvicorn did not listen: {exc}") from exc
        base_url = f"http://127.0.0.1:{port}"
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {process.returncode}: {log_path.read_text(errors='replace')[-3000:]}")
            try:
                if httpx.get(f"{base_url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not answer in 60 s: {log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.05)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
