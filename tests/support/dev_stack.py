"""A real `poolq dev up` stack (Redis, SeaweedFS, API, worker, beat) for one test module."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from poolq.devtools.devstack.process import pid_alive

REPO_ROOT = Path(__file__).resolve().parents[2]


def poolq(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m poolq.api ARGS`` from the repository root, capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "poolq.api", *args], cwd=REPO_ROOT, capture_output=True, text=True,
        env={**os.environ, **(env or {})}, timeout=timeout,
    )


# A stack whose jobs move visibly: steps of 1,024 tokens, shards of at most 20 documents, progress and
# cancel checks every half second (even on 2 busy cores), float32 for comparisons at 1e-5.
LIVE_STACK_ENV = {"POOLQ_MAX_NUM_BATCHED_TOKENS": "1024", "POOLQ_SHARD_MAX_DOCUMENTS": "20",
                  "POOLQ_PROGRESS_INTERVAL_S": "0.5", "POOLQ_CANCEL_CHECK_INTERVAL_S": "0.5",
                  "POOLQ_COMPUTE_DTYPE": "float32"}


@contextmanager
def dev_stack(state_dir: Path, env: dict | None = None) -> Iterator[dict]:
    """`poolq dev up` on free ports (port 0: each service gets one nobody else can take first);
    yields `poolq dev status --json` (+ "dir", and "up_output": what `up` printed), whose "ports" and
    URLs say which; `down` afterwards, checking that nothing it started is left running."""
    up = poolq("dev", "up", "--dir", str(state_dir), "--redis-port", "0", "--s3-port", "0", "--api-port", "0", env=env)
    info: dict = {"pids": {}}
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        status = poolq("dev", "status", "--dir", str(state_dir), "--json")
        assert status.returncode == 0, status.stdout + status.stderr
        info = json.loads(status.stdout)
        yield {**info, "dir": str(state_dir), "up_output": up.stdout + up.stderr}
    finally:
        down = poolq("dev", "down", "--dir", str(state_dir))
        assert down.returncode == 0, down.stderr
    assert not any(pid_alive(pid) for pid in info["pids"].values()), "dev down left processes running"
