"""A real `poolq dev up` stack in a temporary folder, found from another directory with no POOLQ_*
settings at all: by `poolq wait`, `status`, `dev status`, `logs` and `flower` (its broker and its
login), through the user's record of running stacks under $XDG_STATE_HOME/poolq. The job's
lines in the stack's logs (JSON) tell its story from submission to finish, each naming the job."""
import json
import os
import signal
import stat
import subprocess
import sys
import time

import httpx
import pytest
from support.dev_stack import dev_stack

from poolq.api.client.poolq_client import PoolqClient
from poolq.devtools.devstack.ports import wait_listening_port

pytestmark = pytest.mark.integration
STORY = ("job_submitted", "job_planned", "shard_started", "shard_committed", "job_finished")


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    root = tmp_path_factory.mktemp("anywhere")
    (root / "elsewhere").mkdir()
    return {"state_home": root / "state", "project": root / "project", "elsewhere": root / "elsewhere"}


@pytest.fixture(scope="module")
def stack(places):
    env = {"XDG_STATE_HOME": str(places["state_home"]), "POOLQ_LOG_FORMAT": "json", "POOLQ_SHARD_MAX_DOCUMENTS": "3"}
    with dev_stack(places["project"] / ".poolq", env=env) as info:
        yield info


@pytest.fixture(scope="module")
def clean_env(places):
    """No POOLQ_* setting at all (no API URL, key, store, broker or stack directory): only the user's state home."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("POOLQ_")}
    return {**env, "XDG_STATE_HOME": str(places["state_home"])}


def _poolq(places, env, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "poolq.api", *args], cwd=places["elsewhere"], env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def job_id(stack, places, clean_env, sample_documents):
    """A job submitted with the stack's own URL and key; `poolq wait` from elsewhere, with no settings, sees it finish."""
    documents = [{"id": d["id"], "text": d["text"][:300]} for d in sample_documents[:7]]
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        job = client.submit({"input": {"documents": documents}})
    waited = _poolq(places, clean_env, "wait", job["id"], "--poll-interval", "0.2", "--timeout", "240")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    return job["id"]


def test_the_record_of_running_stacks_is_private(stack, places):
    notes = list((places["state_home"] / "poolq" / "stacks").glob("*.json"))
    assert len(notes) == 1 and json.loads(notes[0].read_text())["state_dir"] == stack["dir"]
    assert stat.S_IMODE(notes[0].stat().st_mode) == 0o600
    for folder in (notes[0].parent, notes[0].parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_status_and_dev_status_find_the_stack_from_another_directory(stack, job_id, places, clean_env):
    status = _poolq(places, clean_env, "status", job_id)
    assert status.returncode == 0 and f"job {job_id} succeeded: 7/7 documents" in status.stdout, status.stderr
    dev_status = _poolq(places, clean_env, "dev", "status", "--json")
    assert dev_status.returncode == 0 and json.loads(dev_status.stdout)["state_dir"] == stack["dir"]


def test_a_jobs_log_lines_carry_its_id_from_submit_to_finish(stack, job_id, places, clean_env):
    found = _poolq(places, clean_env, "logs", job_id, "--json")
    assert found.returncode == 0, found.stderr
    lines = [json.loads(line) for line in found.stdout.splitlines()]
    story = [line for line in lines if line.get("event")]
    events = [line["event"] for line in story]
    assert events[0] == "job_submitted" and events[1] == "job_planned" and events[-1] == "job_finished", events
    assert all(line["job_id"] == job_id and line["tenant"] == "dev" for line in story), story
    assert all(line.get("tenant") == "dev" for line in lines), lines  # the steps' other lines carry it too
    planned, finished = story[1], story[-1]
    assert planned["shards"] == 3 and planned["documents"] == 7
    committed = [line for line in story if line["event"] == "shard_committed"]
    started = [line for line in story if line["event"] == "shard_started"]
    assert sorted(line["shard"] for line in committed) == [0, 1, 2] and len(started) >= 3
    assert all(line["tokens"] > 0 and line["seconds"] > 0 and line["attempt"] for line in committed)
    assert finished["status"] == "succeeded" and (finished["completed"], finished["failed"]) == (7, 0)
    assert finished["tokens"] == sum(line["tokens"] for line in committed)
    human = _poolq(places, clean_env, "logs", job_id)
    assert human.returncode == 0 and f"job {job_id}: planned: 3 shards, 7 documents" in human.stdout


def test_the_workers_start_up_line_names_the_dtype_and_cpu_flags(stack):
    with open(os.path.join(stack["dir"], "logs", "worker.log"), encoding="utf-8") as log:
        lines = [json.loads(line) for line in log if line.startswith("{")]
    startup = [line["message"] for line in lines if "compute dtype" in line["message"]]
    assert startup and "cpu flags:" in startup[0], [line["message"] for line in lines][:20]


def test_flower_finds_the_stacks_broker_and_login_from_another_directory(stack, places, clean_env):
    log_path = places["elsewhere"] / "flower.err"
    with open(log_path, "w") as err:
        flower = subprocess.Popen([sys.executable, "-m", "poolq.api", "flower", "--port", "0"], cwd=places["elsewhere"],
                                  env=clean_env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        port = wait_listening_port(flower.pid, 60, "Flower", log_path=log_path)
        url = f"http://127.0.0.1:{port}/api/workers"
        assert httpx.get(url, timeout=10).status_code == 401  # the stack's login is asked for
        login = ("poolq", stack["flower_password"])
        deadline, workers = time.monotonic() + 30, {}
        while not workers and time.monotonic() < deadline:
            workers = httpx.get(url, params={"refresh": "1"}, auth=login, timeout=10).json()
            time.sleep(0.5)
        assert any(name.startswith("poolq-dev-") for name in workers), (workers, log_path.read_text()[-2000:])
    finally:
        if flower.poll() is None:
            os.killpg(flower.pid, signal.SIGTERM)
        flower.wait(20)
