"""One tenant's slow webhooks stall nobody else's jobs (J3 item 2), on a real `poolq dev up` stack:
`poolq worker`'s control worker (2 slots), webhook worker and compute worker, Redis, SeaweedFS.

Tenant A's 16 jobs name receivers that trickle their answer or never answer; while their deliveries
hang, tenant B's 2-document job must take no more than 2 s longer than it took alone (measured first,
on the same stack), B's own webhook must still arrive at once, and A's receivers must never hold
more than A's share of deliveries (``POOLQ_WEBHOOK_TENANT_CONCURRENCY``). With deliveries on the
control queue (the old routing), B's job waited behind A's deliveries for as long as they hung."""
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.dev_stack import dev_stack
from support.stalling_receiver import stalling_receiver

from poolq.api.client.poolq_client import PoolqClient
from poolq.jobs.spec.job_status import JobStatus

pytestmark = pytest.mark.integration

A_JOBS = 16
TENANT_SHARE = 2  # A's deliveries in flight at once
B_DOCUMENTS = [{"id": f"b{i}", "text": f"tenant b's document number {i}, short and plain"} for i in range(2)]
ENDED = ("succeeded", "partially_succeeded", "failed", "cancelled")


@pytest.fixture(scope="module")
def receiver():
    with stalling_receiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def stack(tmp_path_factory, receiver):
    env = {"POOLQ_WEBHOOK_ALLOW": f"http://127.0.0.1:{receiver.port}", "POOLQ_WEBHOOK_RETRY_BASE_S": "1",
           "POOLQ_WEBHOOK_TENANT_CONCURRENCY": str(TENANT_SHARE),
           "POOLQ_RATE_LIMIT_PER_S": "1000", "POOLQ_RATE_LIMIT_BURST": "1000"}  # the polls below are many
    with dev_stack(tmp_path_factory.mktemp("slow-receivers"), env=env) as info:
        yield info
        receiver.stop.set()  # A's receivers let go: the webhook worker's shutdown waits on no hanging attempt


def _key_of_new_tenant(stack, tenant: str) -> str:
    env = {name: value for name, value in os.environ.items() if not name.startswith("POOLQ_")}
    created = subprocess.run([sys.executable, "-m", "poolq.api", "keys", "create", "--tenant", tenant],
                             env={**env, "POOLQ_DEV_DIR": stack["dir"]}, capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    return created.stdout.strip().splitlines()[-1]


def _timed_job(client: PoolqClient, spec: dict, timeout: float = 60) -> tuple[float, JobStatus]:
    """Seconds from submitting ``spec`` to its job's end, and its final status."""
    started = time.monotonic()
    job = client.submit(spec)
    final = client.wait(job.id, poll_interval=0.05, timeout=timeout)
    return time.monotonic() - started, final


def _b_job(receiver) -> dict:
    return {"input": {"documents": B_DOCUMENTS}, "webhook": {"url": receiver.url("/fast")}}


def _webhook_state(client: PoolqClient, job_id: str) -> str | None:
    webhook = client.get(job_id).webhook
    return None if webhook is None else webhook.state


def _wait_for(probe, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)
    return True


def test_a_tenants_hanging_receivers_cost_another_tenants_job_nothing(stack, receiver):
    with ThreadPoolExecutor(1) as pool, PoolqClient(stack["api_url"], stack["api_key"]) as a:
        b_key = pool.submit(_key_of_new_tenant, stack, "tenant-b")  # a CLI process, meanwhile:
        _timed_job(a, {"input": {"documents": B_DOCUMENTS}})  # warm-up: the compute worker loads the model
        with PoolqClient(stack["api_url"], b_key.result()) as b:
            _beside_hanging_receivers(a, b, receiver)


def _beside_hanging_receivers(a: PoolqClient, b: PoolqClient, receiver) -> None:
    alone_s, alone = _timed_job(b, _b_job(receiver))
    assert alone.status == "succeeded", alone

    hooks = [receiver.url("/trickle" if i % 2 else "/silent") for i in range(A_JOBS)]
    a_jobs = [a.submit({"input": {"documents": [{"id": "a", "text": f"tenant a's job {i}"}]},
                        "webhook": {"url": url}}).id for i, url in enumerate(hooks)]
    # A's jobs end (their deliveries do not hold them) and A's receivers hang on to deliveries
    a_ended = _wait_for(lambda: all(a.get(job_id).status in ENDED for job_id in a_jobs), 60)
    hanging = _wait_for(lambda: receiver.open_now >= TENANT_SHARE, 10)

    busy_s, busy = _timed_job(b, _b_job(receiver), timeout=90)
    print(f"tenant b's job: {alone_s:.2f} s alone, {busy_s:.2f} s beside tenant a's hanging receivers "
          f"({receiver.stalled} stalled requests, at most {receiver.most_open} open at once)")
    assert busy.status == "succeeded", busy
    assert busy_s <= alone_s + 2.0, f"tenant b's job took {busy_s:.2f} s, {alone_s:.2f} s alone"
    # B's own delivery is not queued behind A's: it arrives as its job ends
    assert _wait_for(lambda: _webhook_state(b, busy.id) == "delivered", 3), b.get(busy.id)
    assert a_ended and hanging, (a_ended, hanging, receiver.open_now)
    # A's receivers held at most A's share of the webhook worker's threads, whatever they did
    assert receiver.most_open <= TENANT_SHARE, receiver.most_open
    assert all(_webhook_state(a, job_id) == "pending" for job_id in a_jobs)
