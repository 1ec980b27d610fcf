"""Test doubles for the jobs layer: a settable clock, an enqueuer that records tasks, a drain."""
from __future__ import annotations

from poolq.jobs.steps.enqueuer import Enqueuer
from poolq.jobs.steps.finalizer import finalize_job
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.shard_runner import run_shard


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

    def run_shard(self, job_id, shard):
        self.tasks.append(("shard", job_id, shard))

    def finalize(self, job_id):
        self.tasks.append(("finalize", job_id))

    def waiting(self, queue):
        return self.depths.get(queue, 0)

    def take(self) -> list[tuple]:
        """The tasks recorded so far, forgetting them."""
        tasks, self.tasks = self.tasks, []
        return tasks


def drain(ctx) -> None:
    """Run the recorded tasks (and those they record) until none is left."""
    steps = {"plan": plan_job, "shard": run_shard, "finalize": finalize_job}
    while ctx.enqueuer.tasks:
        kind, *args = ctx.enqueuer.tasks.pop(0)
        steps[kind](*args, ctx)
