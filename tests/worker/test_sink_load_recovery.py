"""A sink load whose worker is killed never stays ``pending``: Celery delivers its task again at once
(acks late), that delivery finds the dead attempt's lease and comes back once the lease lapses; the
reconciler sends again a load left pending past its lease, the job long gone from the active list.

The table is shared: another tenant's job loaded its rows first, and the load is the second run of
a lineage (incremental), so "exactly the right rows" means the lineage's gone document deleted and
the other tenant's rows untouched. Jobs run once per module with the real model and the in-process
sink; tasks are recorded, leases and the reconciler run on a fake clock; a kill is an exception no
code catches, after which the lease is never released (a killed process releases nothing).
"""
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest
from support.job_doubles import FakeClock, RecordingEnqueuer, drain, run_task

from poolq.jobs.coordination.leases import InMemoryLeaseStore
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.manifest import ManifestSink
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.sink_config import SinkState
from poolq.jobs.steps.submit import submit_job
from poolq.products.sinks import sink_load
from poolq.products.sinks.sink_entries import rewrite_sinks, send_pending_loads
from poolq.products.sinks.stores.memory_sink import MemorySink
from poolq.storage import read_embeddings
from poolq.worker.local_runner import local_context
from poolq.worker.reconciler import reconcile

MODEL = "all-MiniLM-L6-v2"
TENANT, OTHER = "acme", "globex"
TTL = 60.0
SINK_UNIT = "sinks"
JOB_STEPS = frozenset({"plan", "plan_section", "shard", "finalize"})


class Killed(BaseException):
    """kill -9 of the worker: nothing catches it, and the process releases nothing afterwards."""


class KillableLeases(InMemoryLeaseStore):
    """Leases on the test's clock; once ``dead`` (the worker was killed) a release does nothing."""

    def __init__(self, clock) -> None:
        super().__init__(clock=clock, wall_clock=clock)
        self.dead = False
        self.kill_at_release = False

    def release(self, lease) -> None:
        if self.kill_at_release:
            self.kill_at_release, self.dead = False, True
            raise Killed("before releasing the lease")
        if not self.dead:
            super().release(lease)


def _docs(*texts: tuple[str, str]) -> list[dict]:
    return [{"id": doc_id, "text": text} for doc_id, text in texts]


def _run(ctx, tenant: str, documents: list[dict], incremental_from: str | None = None, load: bool = True) -> JobHandle:
    spec = JobSpec.model_validate({"input": {"documents": documents}, "sink": "search", "incremental_from": incremental_from})
    job = JobHandle.bind(ctx, submit_job(ctx, spec, tenant=tenant).id)
    drain(ctx, only=JOB_STEPS)
    if load:
        drain(ctx, only=frozenset({"sink"}))
    ctx.enqueuer.take()  # a load not run here: its message was lost
    return job


def _hashes(job: JobHandle) -> dict[tuple[str, int], str]:
    rows = {}
    for part in job.ledger.manifest().parts:
        table = read_embeddings(job.ctx.store.get(part.key), columns=["id", "content_hash"])
        rows |= {(record_id, 0): digest for record_id, digest in zip(*(table.column(n).to_pylist() for n in table.column_names))}
    return rows


@pytest.fixture(scope="module")
def world(tmp_path_factory, minilm_engine):
    """The other tenant's rows and the lineage's first run are loaded; its second run (d1 edited, d3
    gone) has finished, its load not run yet. Then: the rows the table must end with."""
    root = tmp_path_factory.mktemp("sink-recovery")
    settings = Settings(sinks={"search": f"memory://{root.name}"}, sink_grants={TENANT: ["search"], OTHER: ["search"]},
                        lease_ttl_s=TTL)
    ctx = local_context(root / "out", settings)
    ctx.engines.use(MODEL, minilm_engine)
    ctx.enqueuer = RecordingEnqueuer()
    other = _run(ctx, OTHER, _docs(("x0", "another tenant's first row"), ("x1", "another tenant's second row")))
    texts = [("d0", "the first document"), ("d1", "the second document"), ("d2", "the third one"), ("d3", "the last")]
    first = _run(ctx, TENANT, _docs(*texts))
    second = _run(ctx, TENANT, _docs(texts[0], ("d1", "the second document, edited"), texts[2]), first.id, load=False)
    expected = {key: (digest, OTHER, other.id) for key, digest in _hashes(other).items()}
    expected |= {key: (digest, TENANT, first.id) for key, digest in _hashes(second).items()}
    sink = MemorySink.named(root.name)
    return SimpleNamespace(ctx=ctx, job=second, sink=sink, table=sink.rows, before=dict(sink.rows), expected=expected)


@pytest.fixture
def clock() -> FakeClock:
    clock = FakeClock()
    clock.now = time.time()  # the pending-load marker is written on the wall clock
    return clock


@pytest.fixture
def setup(world, clock):
    """The table as both earlier loads left it; the second run's load pending and just sent."""
    world.table.clear()
    world.table.update(world.before)
    world.ctx.leases = KillableLeases(clock)
    rewrite_sinks(world.job, [ManifestSink(name="search", state=SinkState.PENDING)])
    send_pending_loads(world.job, world.job.ledger.manifest())  # as the finalizer does
    world.ctx.enqueuer.take()
    return world


def _state(job: JobHandle) -> str:
    (entry,) = job.ledger.manifest().sinks
    return entry.state


def _rows(table) -> dict:
    return {key: (row["content_hash"], row.get("poolq_tenant"), row.get("poolq_lineage")) for key, row in table.items()}


def _recover(ctx, job: JobHandle, clock: FakeClock) -> list[tuple]:
    """What follows a kill: Celery delivers the task again at once; a task sent with a countdown
    runs when it is due. Returns the tasks run."""
    queue, ran = [("sink", job.id)], []
    while queue and len(ran) < 5:
        task = queue.pop(0)
        clock.advance(task[2] if len(task) > 2 else 0.3)
        run_task(task, ctx)
        ran.append(task)
        queue += ctx.enqueuer.take()
    return ran


def test_a_load_that_finds_a_live_lease_comes_back_once_it_lapses(setup, clock):
    ctx, job, table, expected = setup.ctx, setup.job, setup.table, setup.expected
    ctx.leases.acquire(job.id, SINK_UNIT, TTL)  # a load whose worker was killed 10 s ago
    ctx.leases.dead = True
    clock.advance(10)
    sink_load.load_sinks(job)  # Celery's redelivery
    [(kind, job_id, countdown)] = ctx.enqueuer.take()
    assert (kind, job_id) == ("sink", job.id) and TTL - 10 <= countdown <= TTL - 10 + 2
    assert _state(job) == SinkState.PENDING

    clock.advance(countdown)
    run_task(("sink", job.id, countdown), ctx)
    assert _state(job) == SinkState.SUCCEEDED and _rows(table) == expected
    assert ctx.enqueuer.take() == []  # nothing more comes back


class _KillingSink:
    """The in-process sink, killed at one step of the load."""

    def __init__(self, sink: MemorySink, step: str, leases: KillableLeases) -> None:
        self.sink, self.step, self.leases = sink, step, leases

    def _kill(self, step: str) -> None:
        if self.step == step:
            self.step, self.leases.dead = "", True
            raise Killed(step)

    def stored_keys(self):
        self._kill("reading the table")
        return self.sink.stored_keys()

    def apply(self, load):
        self._kill("writing")
        if self.step == "half-written":  # the rows are written, the stale ones not deleted yet
            self.sink.apply(replace(load, stale=frozenset()))
            self._kill("half-written")
        self.sink.apply(load)

    def close(self) -> None:
        self.sink.close()


STEPS = ["reading the table", "writing", "half-written", "recording the outcome", "releasing the lease"]


@pytest.mark.parametrize("step", STEPS)
def test_a_load_killed_at_any_step_ends_loaded_with_exactly_the_right_rows(setup, clock, monkeypatch, step):
    ctx, job, table, expected = setup.ctx, setup.job, setup.table, setup.expected
    sink = _KillingSink(setup.sink, step, ctx.leases)
    monkeypatch.setattr(sink_load, "open_sink", lambda name, settings: sink)
    if step == "recording the outcome":
        rewrite = sink_load.rewrite_sinks

        def killed_once(*args):
            monkeypatch.setattr(sink_load, "rewrite_sinks", rewrite)
            ctx.leases.dead = True
            raise Killed(step)

        monkeypatch.setattr(sink_load, "rewrite_sinks", killed_once)
    ctx.leases.kill_at_release = step == "releasing the lease"

    with pytest.raises(Killed):
        sink_load.load_sinks(job)
    ctx.leases.dead = False  # a new worker process
    _recover(ctx, job, clock)
    assert _state(job) == SinkState.SUCCEEDED and _rows(table) == expected

    clock.advance(2 * TTL)  # and the reconciler, later, finds nothing left to send
    report = reconcile(ctx, now=clock.now)
    assert not [unit for unit in report.resent if unit.endswith("/sinks")] and ctx.enqueuer.take() == []


def test_the_reconciler_sends_again_a_load_left_pending_past_its_lease(setup, clock):
    ctx, job, table, expected = setup.ctx, setup.job, setup.table, setup.expected
    assert not ctx.store.exists(ctx.service_layout.active(job.id))  # the job left the active list
    ctx.leases.acquire(job.id, SINK_UNIT, TTL)  # killed holding its lease; every message of it lost
    ctx.leases.dead = True

    clock.advance(TTL - 1)
    assert reconcile(ctx, now=clock.now).resent == [] and ctx.enqueuer.take() == []  # the lease is live
    clock.advance(2)
    report = reconcile(ctx, now=clock.now)
    assert report.resent == [f"{job.id}/sinks"] and ctx.enqueuer.take() == [("sink", job.id)]
    clock.advance(TTL / 2)
    assert reconcile(ctx, now=clock.now).resent == []  # sent within a lease: it may still be on its way

    ctx.leases.dead = False
    run_task(("sink", job.id), ctx)
    assert _state(job) == SinkState.SUCCEEDED and _rows(table) == expected
    clock.advance(2 * TTL)
    assert reconcile(ctx, now=clock.now).resent == []

