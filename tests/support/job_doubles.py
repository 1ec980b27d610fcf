"""Test doubles for the jobs layer: a settable clock, an enqueuer that records tasks, a drain."""
from __future__ import annotations

from types import SimpleNamespace

from poolq.jobs.coordination.enqueuer import Enqueuer
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.layout import ServiceLayout
from poolq.jobs.ledger.planning_ledger import SectionStage
from poolq.jobs.steps.finalizer import finalize_job
from poolq.jobs.steps.plan_section import plan_section
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.shards.shard_runner import run_shard
from poolq.products.batches.batch_advance import advance_batch
from poolq.products.sinks.sink_load import load_sinks


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingEnqueuer(Enqueuer):
    """Records each task instead of sending it; ``drain(ctx)`` runs them in order."""

    def __init__(self) -> None:
        self.tasks: list[tuple] = []
        self.depths: dict[str, int] = {}  # queue -> messages waiting (what ``waiting`` answers)

    def plan(self, job_id):
        self.tasks.append(("plan", job_id))

    def plan_section(self, job_id, stage, section):
        self.tasks.append(("plan_section", job_id, stage, section))

    def run_shard(self, job_id, shard):
        self.tasks.append(("shard", job_id, shard))

    def finalize(self, job_id):
        self.tasks.append(("finalize", job_id))

    def advance_batch(self, tenant, batch_id):
        self.tasks.append(("batch", tenant, batch_id))

    def load_sinks(self, job_id, countdown_s=0.0):
        self.tasks.append(("sink", job_id, countdown_s) if countdown_s else ("sink", job_id))

    def deliver_webhook(self, job_id, name, attempt=0, countdown_s=0.0):
        self.tasks.append(("webhook", job_id, name, attempt, countdown_s))

    def waiting(self, queue):
        return self.depths.get(queue, 0)

    def take(self) -> list[tuple]:
        """The tasks recorded so far, forgetting them."""
        tasks, self.tasks = self.tasks, []
        return tasks


# What each recorded task runs: its job is bound once, then the step gets the handle.
JOB_STEPS = {"plan": plan_job, "plan_section": lambda job, stage, section: plan_section(job, SectionStage(stage), section),
             "shard": run_shard, "finalize": finalize_job,
             "sink": lambda job, countdown_s=0.0: load_sinks(job)}  # a countdown is the test's to wait out


def run_task(task: tuple, ctx) -> None:
    kind, *args = task
    if kind == "batch":
        advance_batch(ctx, *args)
        return
    job_id, *rest = args
    JOB_STEPS[kind](JobHandle.bind(ctx, job_id), *rest)


PLANNING = frozenset({"plan", "plan_section"})


def drain(ctx, only: frozenset[str] | None = None) -> None:
    """Run the recorded tasks (and those they record) in order until none is left; with ``only``,
    just the tasks of those kinds (the others stay recorded)."""
    while True:
        runnable = [task for task in ctx.enqueuer.tasks if only is None or task[0] in only]
        if not runnable:
            return
        ctx.enqueuer.tasks.remove(runnable[0])
        run_task(runnable[0], ctx)


def bindable_context(**parts) -> SimpleNamespace:
    """A stand-in context with just what binding a job needs (every job belongs to tenant ``acme``),
    plus ``parts`` (``status=...``): for the Celery edge's tests, whose steps are stubbed."""
    return SimpleNamespace(tenant_of=lambda job_id: "acme", service_layout=ServiceLayout("jobs"), store=None, **parts)


class QueueRecordingEnqueuer(RecordingEnqueuer):
    """Records, beside each shard task, the queue it was sent to (model affinity)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent_to: list[tuple[str, int, str]] = []

    def run_shard_on(self, job_id, shard, queue):
        self.sent_to.append((job_id, shard, queue))
        super().run_shard_on(job_id, shard, queue)
