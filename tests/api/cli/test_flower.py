"""``poolq flower`` runs Flower on poolq's own broker: it answers, lists a running ``poolq worker``
and sees its tasks (task events are on). The worker logs JSON. About 10 s."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from poolq.devtools.devstack.ports import wait_listening_port
from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, RECONCILE_TASK
from poolq.jobs.settings import Settings
from poolq.worker.celery_app import create_celery_app

REPO_ROOT = Path(__file__).resolve().parents[3]
FLOWER_DB = 8  # a database of its own: Flower and the worker see only this test's traffic
FLOWER_LOGIN = ("ops", "flower-test-password")

pytestmark = pytest.mark.integration


class _Started:
    """Processes this test started, each the leader of its own process group; stopped at the end."""

    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs, self.env, self.procs = logs, env, {}

    def start(self, name: str, *args: str) -> subprocess.Popen:
        out, err = (open(self.logs / f"{name}.{kind}", "w") for kind in ("out", "err"))
        proc = subprocess.Popen([sys.executable, "-m", "poolq.api", *args], cwd=REPO_ROOT, env=self.env, stdout=out,
                                stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.err").read_text(errors="replace")

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


@pytest.fixture
def started(tmp_path, redis_url):
    url = redis_url.rsplit("/", 1)[0] + f"/{FLOWER_DB}"
    env = {**os.environ, "POOLQ_REDIS_URL": url, "POOLQ_STORE": "local", "POOLQ_LOCAL_STORE_ROOT": str(tmp_path / "store"),
           "POOLQ_LOG_FORMAT": "json", "POOLQ_FLOWER_BASIC_AUTH": f"{FLOWER_LOGIN[0]}:{FLOWER_LOGIN[1]}"}
    procs = _Started(tmp_path, env)
    yield procs
    procs.stop()


def _eventually(probe, timeout: float, what: str, logs=lambda: ""):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except httpx.HTTPError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}\n{logs()}")
        time.sleep(0.3)


def test_flower_lists_the_worker_and_its_tasks(started):
    flower = started.start("flower", "flower", "--port", "0")  # port 0: one nobody can take first
    worker = started.start("worker", "worker", "--hostname", "flowertest@%h", "--queues", CONTROL_QUEUE)

    def logs() -> str:
        return "\n".join(f"--- {name} ---\n{started.log(name)[-2000:]}" for name in started.procs)

    port = wait_listening_port(flower.pid, 30, "Flower", log_path=started.logs / "flower.err")
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, auth=FLOWER_LOGIN)

    _eventually(lambda: http.get("/healthcheck").text == "OK", 30, "Flower to answer", logs)
    for page in ("/", "/workers", "/tasks", "/api/tasks"):  # every page asks for the login
        assert httpx.get(f"http://127.0.0.1:{port}{page}", timeout=10).status_code == 401, page
        assert httpx.get(f"http://127.0.0.1:{port}{page}", auth=("ops", "guess"), timeout=10).status_code == 401, page
    _eventually(lambda: " ready." in started.log("worker") or worker.poll() is not None, 30, "the worker", logs)
    workers = _eventually(lambda: http.get("/api/workers", params={"refresh": "1"}).json(), 20, "Flower to list it", logs)
    assert [name for name in workers if name.startswith("flowertest@")], workers

    create_celery_app(Settings(redis_url=started.env["POOLQ_REDIS_URL"])).send_task(RECONCILE_TASK, queue=CONTROL_QUEUE)

    def seen():
        return [t for t in http.get("/api/tasks").json().values() if t["name"] == RECONCILE_TASK and t["state"] == "SUCCESS"]

    task = _eventually(seen, 20, "Flower to see the task succeed", logs)[0]
    assert task["sent"] and task["worker"].startswith("flowertest@")  # sent: the producer's event reached Flower too

    ready = [json.loads(line) for line in started.log("worker").splitlines() if line.startswith("{") and " ready." in line]
    assert ready and ready[0]["logger"] == "celery.apps.worker"


def test_flower_refuses_to_start_without_a_login(started):
    env = {k: v for k, v in started.env.items() if k != "POOLQ_FLOWER_BASIC_AUTH"}
    done = subprocess.run([sys.executable, "-m", "poolq.api", "flower", "--port", "0"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "POOLQ_FLOWER_BASIC_AUTH" in done.stderr and "Traceback" not in done.stderr
