"""The queue answers in real time, on a real `poolq dev up` stack (one compute worker, one control
worker): progress moves inside one long document, a cancel stops it mid-way, a small job overtakes
a large one, and planning goes on while the only compute worker is busy. No timing assertions:
each test says what must happen in which order, and waits for it with generous timeouts."""
import json
import os
import subprocess
import sys
import time

import pytest
from support.dev_stack import LIVE_STACK_ENV, dev_stack

from poolq.api.client.poolq_client import PoolqClient
from poolq.storage import S3Config, make_s3_client

pytestmark = pytest.mark.integration

TERMINAL = {"succeeded", "partially_succeeded", "failed", "cancelled"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with dev_stack(tmp_path_factory.mktemp("live"), env=LIVE_STACK_ENV) as info:
        yield info


@pytest.fixture(scope="module")
def client(stack):
    with PoolqClient(stack["api_url"], stack["api_key"]) as poolq:
        yield poolq


@pytest.fixture(scope="module")
def other_tenant(stack):
    env = {name: value for name, value in os.environ.items() if not name.startswith("POOLQ_")}
    env["POOLQ_DEV_DIR"] = stack["dir"]
    created = subprocess.run([sys.executable, "-m", "poolq.api", "keys", "create", "--tenant", "other"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    with PoolqClient(stack["api_url"], created.stdout.strip().splitlines()[-1]) as poolq:
        yield poolq


@pytest.fixture(scope="module")
def long_text(long_documents) -> str:
    """One document of ~40,000 tokens: real Wikipedia text, its articles one after another."""
    text = "\n\n".join(document["text"] for document in long_documents)
    return (text * (1 + 200_000 // len(text)))[:200_000]


def _tokens_done(job: dict) -> int:
    return job["usage"]["tokens"] + job["in_progress"]["tokens"]


def _wait(client, job_id: str, until, timeout: float = 600, interval: float = 0.2) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(job_id)
        if until(job):
            return job
        assert time.monotonic() < deadline, f"job {job_id} never got there: {job}"
        time.sleep(interval)


def _errors(stack, job: dict) -> list[dict]:
    manifest = json.loads(_s3(stack).get_object(Bucket=stack["bucket"], Key=job["result"]["manifest_uri"].split(
        stack["bucket"] + "/", 1)[1])["Body"].read())
    body = _s3(stack).get_object(Bucket=stack["bucket"], Key=manifest["errors"]["key"])["Body"].read().decode()
    return [json.loads(line) for line in body.splitlines()]


def _s3(stack):
    return make_s3_client(S3Config(stack["s3_endpoint"], stack["access_key_id"], stack["secret_access_key"]))


def test_the_progress_of_one_long_document_moves_step_by_step(client, long_text):
    job = client.submit({"input": {"documents": [{"id": "long", "text": long_text}]},
                         "long_documents": {"mode": "chunked"}})
    seen, estimates = [], []

    def note(polled: dict) -> bool:
        seen.append(_tokens_done(polled))
        if polled["status"] == "running" and polled["estimate"]["measured"]:
            estimates.append(polled["estimate"]["tokens"])
        return polled["status"] in TERMINAL

    final = _wait(client, job["id"], note)
    assert final["status"] == "succeeded", final
    moving = sorted(set(seen))
    # Tokens done grew through at least 5 distinct counts while its only document ran, never backwards
    assert len([count for count in moving if 0 < count < final["usage"]["tokens"]]) >= 5, moving
    assert seen == sorted(seen)
    # And while it ran, the job knew its tokens in all (tokenized before its windows ran): the ETA's basis
    # (on failure: the estimates off by more than 5 %, how many were seen, and the progress they were seen beside)
    off = [estimate for estimate in estimates if abs(estimate - final["usage"]["tokens"]) > 0.05 * final["usage"]["tokens"]]
    assert estimates and not off, (off, len(estimates), final["usage"], seen)


def test_a_cancel_stops_a_long_document_mid_way_and_lists_it_as_not_processed(stack, client, long_text):
    job = client.submit({"input": {"documents": [{"id": "long", "text": long_text}]},
                         "long_documents": {"mode": "chunked"}})
    _wait(client, job["id"], lambda j: _tokens_done(j) > 0)  # its only document is being embedded
    client.cancel(job["id"])
    final = _wait(client, job["id"], lambda j: j["status"] in TERMINAL, timeout=120)
    assert final["status"] == "cancelled", final
    assert final["counts"] == {"total": 1, "completed": 0, "failed": 0, "not_processed": 1}
    # Its not_processed list names it: the one line of the error file, code not_processed
    assert [(error["id"], error["code"]) for error in _errors(stack, final)] == [("long", "not_processed")]


def test_a_small_job_of_another_tenant_finishes_before_a_large_one(client, other_tenant, sample_documents):
    large_documents = [{"id": f"big-{i}", "text": document["text"]} for i, document in enumerate(sample_documents * 8)]
    large = client.submit({"input": {"documents": large_documents}, "long_documents": {"mode": "chunked"}})
    _wait(client, large["id"], lambda j: j["counts"]["completed"] > 0)  # the large job holds the compute worker
    small = other_tenant.submit({"input": {"documents": [{"id": f"q{i}", "text": f"a short query {i}"} for i in range(10)]}})
    # From the moment the small job is planned (it joins fair share) to the moment its one shard is
    # committed, the large job may finish the shard it is running, and no more: the next free slot
    # is the small job's. Planning and finalizing the small job are the control worker's, and take
    # seconds on a loaded machine while the compute worker goes on with the large job, so they lie
    # outside the window (counting from submit to the end let 3 large shards in, 20 -> 80).
    _wait(other_tenant, small["id"], lambda j: j["counts"]["total"] is not None)
    before = client.get(large["id"])
    _wait(other_tenant, small["id"], lambda j: j["counts"]["completed"] > 0, interval=0.05)
    after = client.get(large["id"])
    small_final = _wait(other_tenant, small["id"], lambda j: j["status"] in TERMINAL)
    assert small_final["status"] == "succeeded", small_final
    # The small job ended while the large one was still running, and it waited for no backlog of the
    # large one's shards: at most the one running (and one more for a commit racing the small job's
    # planning; 20 documents a shard)
    assert client.get(large["id"])["status"] == "running"
    assert after["counts"]["completed"] - before["counts"]["completed"] <= 2 * 20, (before["counts"], after["counts"])
    client.cancel(large["id"])
    _wait(client, large["id"], lambda j: j["status"] in TERMINAL, timeout=120)


def test_planning_completes_while_the_only_compute_worker_is_busy(client, long_text):
    busy = client.submit({"input": {"documents": [{"id": "long", "text": long_text}]},
                          "long_documents": {"mode": "chunked"}})
    _wait(client, busy["id"], lambda j: _tokens_done(j) > 0)  # the compute worker runs its shard
    second = client.submit({"input": {"documents": [{"id": f"d{i}", "text": f"document {i}"} for i in range(50)]}})
    # The second job is planned (its total is known) by the control worker while the first's shard still runs
    planned = _wait(client, second["id"], lambda j: j["counts"]["total"] is not None, timeout=120)
    assert planned["counts"]["total"] == 50
    assert client.get(busy["id"])["status"] == "running"
    for job in (busy, second):
        if client.get(job["id"])["status"] not in TERMINAL:
            client.cancel(job["id"])
