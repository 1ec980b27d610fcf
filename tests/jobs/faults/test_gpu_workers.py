"""`poolq worker --gpus 0,1`: one worker process per GPU, started again when one dies, stopped
together by SIGTERM."""
import os
import signal
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def gpu_of(pid: int) -> str | None:
    return environ(pid).get("CUDA_VISIBLE_DEVICES")


def test_gpus_0_1_starts_one_worker_per_gpu_restarts_a_killed_one_and_sigterm_stops_both(deployment):
    # Given `poolq worker --gpus 0,1` (no work is sent: this machine has no CUDA)
    supervisor = deployment.spawn_process("gpus", [sys.executable, "-m", "poolq.api", "worker", "--gpus", "0,1"], "worker")
    # When its workers are up: the control worker, the webhook worker and one compute worker per GPU
    deployment.wait(lambda: supervisor.log().count(" ready.") == 4 or not supervisor.alive(), 120,
                    "the control and webhook workers and both per-GPU workers to be ready")
    children = supervisor.children()
    # Then there is one per GPU, each seeing only its own, and a control and a webhook worker seeing none
    assert len(children) == 4, supervisor.log()[-3000:]
    assert sorted(str(gpu_of(pid)) for pid in children) == ["0", "1", "None", "None"]
    assert "poolq-gpu0@" in supervisor.log() and "poolq-gpu1@" in supervisor.log()
    assert "poolq-control@" in supervisor.log() and "poolq-webhooks@" in supervisor.log()
    # When GPU 0's worker is killed
    killed = next(pid for pid in children if gpu_of(pid) == "0")
    os.kill(killed, signal.SIGKILL)
    # Then it is started again, for the same GPU, and the others are left alone
    deployment.wait(lambda: supervisor.log().count(" ready.") == 5 or not supervisor.alive(), 120,
                    "GPU 0's worker to be started again")
    assert "exited with 137; restarting it" in supervisor.log()
    survivors = [pid for pid in children if pid != killed]
    children = supervisor.children()
    assert len(children) == 4 and killed not in children and set(survivors) <= set(children), supervisor.log()[-3000:]
    assert sorted(str(gpu_of(pid)) for pid in children) == ["0", "1", "None", "None"]
    # and SIGTERM to the supervisor stops them all, and it exits 0
    os.kill(supervisor.pid, signal.SIGTERM)
    assert supervisor.wait_exit(60) == 0, supervisor.log()[-3000:]
    deployment.wait(lambda: not any(Path(f"/proc/{pid}").exists() for pid in children), 30, "the workers to exit")
