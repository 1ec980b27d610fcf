"""A sink load killed mid-run, on real processes (J3 item 3): kill -9 of the worker's pool child
while it loads a succeeded job's rows into a LanceDB table, holding the job's ``sinks`` lease.
Celery delivers the task again at once; that delivery finds the dead attempt's lease, which nothing
releases. The load must still end: the delivery comes back once the lease lapses (and the
reconciler sends again a load left pending past a lease), so the sink ends ``succeeded`` holding
exactly the job's rows, within a lease, a come-back and a few reconciler passes."""
import json
import os
import signal
import time

import lancedb
import pytest

from poolq.jobs import JobHandle
from poolq.jobs.spec.sink_config import SinkState
from poolq.products.sinks.pending_loads import SINK_UNIT
from poolq.products.sinks.sink_load import COME_BACK_AFTER_S

pytestmark = pytest.mark.integration

SINK, TABLE = "lake", "docs"
# A lease longer than Celery takes to deliver a killed child's task again (a new pool child starts
# first, ~2 s here): that delivery finds the dead attempt's lease live, the case the issue saw.
LEASE_TTL_S, RECONCILE_INTERVAL_S = 10, 1
LOAD_S = 20  # a load in a new pool child imports lancedb first (seconds on a busy CI machine)
# The dead attempt's lease lapses, the redelivered task comes back after it (or the reconciler, a pass
# after a lease with no load, sends it again), and the load runs: under a minute, not the 15 minutes
# (for good) the load stayed pending before.
SETTLE_S = LEASE_TTL_S + COME_BACK_AFTER_S + 2 * RECONCILE_INTERVAL_S + LOAD_S


def sink_state(deployment, job_id: str) -> str | None:
    manifest = JobHandle.bind(deployment.ctx, job_id).ledger.manifest()
    return next((entry.state for entry in (manifest.sinks or []) if entry.name == SINK), None) if manifest else None


def stop_the_pool_mid_load(deployment, worker, job_id: str) -> list[int]:
    """Freeze the worker's pool child (SIGSTOP) the moment the job's sink lease is taken; return the
    frozen pids. The load runs for seconds after it takes the lease (a pool child's first load imports
    lancedb, then reads the parts, merges, rewrites the manifest): polling Redis every millisecond
    lands inside it, and the test checks it did (the sink still pending)."""
    deployment.wait(lambda: deployment.ctx.leases.holder(job_id, SINK_UNIT), 60, "the sink load to take its lease",
                    interval=0.001)
    children = worker.children()
    for pid in children:
        os.kill(pid, signal.SIGSTOP)
    return children


# Celery's limits: the suite's 5 s is a shard's; soft < hard < visibility / 2, and a come-back's
# countdown (under a lease) stays under the visibility timeout.
@pytest.mark.settings(lease_ttl_s=LEASE_TTL_S, reconcile_interval_s=RECONCILE_INTERVAL_S, task_soft_time_limit_s=LOAD_S,
                      task_time_limit_s=LOAD_S + 5, visibility_timeout_s=4 * LOAD_S)
def test_kill_9_of_the_pool_child_mid_sink_load(deployment, documents, reference, tmp_path, monkeypatch):
    # Given a LanceDB sink the job's tenant may load into, one worker and the reconciler
    root = tmp_path / "lance"
    monkeypatch.setenv("POOLQ_SINKS", json.dumps({SINK: {"url": f"lancedb://{root}", "table": TABLE}}))
    monkeypatch.setenv("POOLQ_SINK_GRANTS", json.dumps({"local": [SINK]}))  # in-process submissions' tenant
    worker = deployment.start_worker("w1")
    deployment.run_reconciler()
    assert deployment.ctx.leases.holder("none", SINK_UNIT) is None  # the test's context is built before the race
    deployment.job_fields = {"sink": SINK}
    job_id = deployment.submit(documents)
    # When the job has succeeded and its pool child is killed (-9) while it loads the sink
    children = stop_the_pool_mid_load(deployment, worker, job_id)
    assert children, f"the worker has no pool child{deployment.logs()}"
    assert deployment.status(job_id)["status"] == "succeeded"
    assert sink_state(deployment, job_id) == SinkState.PENDING, "the load ended before it could be killed"
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    # (the dead attempt's lease is left live: what every delivery of the task finds for a lease)
    assert deployment.ctx.leases.holder(job_id, SINK_UNIT) is not None
    # Then the sink is loaded anyway, within a lease, a come-back and a few reconciler passes
    deployment.wait(lambda: sink_state(deployment, job_id) != SinkState.PENDING, SETTLE_S,
                    f"the sink of {job_id} to leave pending", interval=0.2)
    assert sink_state(deployment, job_id) == SinkState.SUCCEEDED, deployment.logs()
    assert time.monotonic() - killed_at < SETTLE_S
    assert worker.alive() and not set(children) & set(worker.children())
    # with exactly the job's rows: one per document (truncated), each once
    rows = lancedb.connect(str(root)).open_table(TABLE).to_arrow()
    ids = rows.column("id").to_pylist()
    assert rows.num_rows == len(documents) and sorted(ids) == sorted(d["id"] for d in documents), ids
    # And the job itself is as a clean run leaves it: every record once, no lease, nothing unacked or queued
    deployment.check_outcome(job_id, documents, reference)
