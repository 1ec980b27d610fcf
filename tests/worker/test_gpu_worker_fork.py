"""A real ``poolq worker --gpus 0`` with the default compute dtype ``auto``: neither the supervisor
nor the Celery worker's parent touches CUDA, so its forked pool child can initialise it and
resolve ``auto`` from the device (before, the parent asked for the capability to log it, and every
child then failed with "Cannot re-initialize CUDA in forked subprocess").

There is no GPU here: ``support/fake_torch_cuda.py``, installed into every process by a
``sitecustomize``, plays ``torch.cuda`` and notes who called it. The child's model load still
fails afterwards (no real device); what is shown is the start-up up to the dtype.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import fake_torch_cuda

from poolq.devtools.devstack.ports import ANY_PORT
from poolq.devtools.devstack.redis_server import RedisConfig, RedisServer

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
SITECUSTOMIZE = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("fake_torch_cuda", {fake_torch_cuda.__file__!r})
module = importlib.util.module_from_spec(spec)
sys.modules["fake_torch_cuda"] = module
spec.loader.exec_module(module)
module.install()
"""


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _worker_env(tmp_path: Path, redis_url: str) -> dict[str, str]:
    fake_dir = tmp_path / "fake-cuda"
    fake_dir.mkdir()
    (fake_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {name: value for name, value in os.environ.items()
           if name not in ("POOLQ_COMPUTE_DTYPE", "POOLQ_DTYPE", "CUDA_VISIBLE_DEVICES", "POOLQ_DEVICE")}
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(fake_dir), str(REPO_ROOT), env.get("PYTHONPATH")])),
            "FAKE_CUDA_LOG": str(tmp_path / "cuda-calls.jsonl"), "FAKE_CUDA_CAPABILITY": "8,0",
            "POOLQ_REDIS_URL": redis_url, "POOLQ_STORE": "local", "POOLQ_LOCAL_STORE_ROOT": str(tmp_path / "store"),
            "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_a_gpu_worker_leaves_cuda_to_its_pool_child_which_resolves_auto(tmp_path):
    # Given `poolq worker --gpus 0` (dtype auto: the suite's float32 pin is cleared) on a fake CUDA device
    calls, log_path = tmp_path / "cuda-calls.jsonl", tmp_path / "worker.log"
    with RedisServer(RedisConfig(data_dir=tmp_path / "redis", port=ANY_PORT)) as redis_server, \
            open(log_path, "w") as log:
        supervisor = subprocess.Popen([sys.executable, "-m", "poolq.api", "worker", "--gpus", "0", "--queues", "gpu"],
                                      env=_worker_env(tmp_path, redis_server.url), cwd=REPO_ROOT, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        try:
            # When its pool child has started and asked for the device's capability (or the worker gave up)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and supervisor.poll() is None and not any(
                    event["event"] in ("get_device_capability", "fork-error") for event in _events(calls)):
                time.sleep(0.1)
            time.sleep(0.5)  # what else the child does as it loads is noted too
        finally:
            os.killpg(supervisor.pid, signal.SIGKILL)  # the whole session: supervisor, worker, pool child
            supervisor.wait(10)
    events, output = _events(calls), log_path.read_text(errors="replace")
    # Then the processes that ran from the start (the supervisor, the worker's parent: the fake was
    # installed in both, and would have noted any call) never called torch.cuda
    started = {event["pid"] for event in events if event["event"] == "start"}
    assert supervisor.pid in started and len(started) == 2, (events, output[-3000:])
    worker_parent = next(pid for pid in started if pid != supervisor.pid)
    touched_before_fork = [event for event in events if event["pid"] in started and event["event"] not in ("start", "torch")]
    assert touched_before_fork == [], output[-3000:]
    # and its pool child (a fork of the worker's parent) initialised CUDA and read the capability for `auto`
    in_child = [event for event in events if event["ppid"] == worker_parent and event["pid"] not in started]
    assert {"init", "get_device_capability"} <= {event["event"] for event in in_child}, (events, output[-3000:])
    assert not any(event["event"] == "fork-error" for event in events), output[-3000:]
    assert "Cannot re-initialize CUDA" not in output
    assert "compute dtype auto, resolved in each worker child" in output, output[-3000:]
