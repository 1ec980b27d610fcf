"""The first ETA a job is given (docs/benchmarks.md#eta-accuracy): no job has one while another in
line is still to plan (its work is not counted yet), and an unmeasured job's tokens are its
characters at the characters per token the workers measured for its model, not a fixed 4."""

import pytest
from support.jobs_in_line import MODEL, START, fleet_of_one, job_in_line, planned

from poolq.jobs.coordination.worker_throughput import InMemoryThroughputBoard, MeasuredRate, chars_per_token
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobEstimate, JobStatus, JobUsage
from poolq.jobs.status.current_status import current_status
from poolq.jobs.status.token_prior import with_prior


@pytest.fixture
def ctx(tmp_path):
    return fleet_of_one(tmp_path / "out")


def _status(ctx, job_id: str, tenant: str) -> JobStatus:
    return current_status(JobHandle.of_tenant(ctx, job_id, tenant))


def test_no_eta_while_another_job_in_line_is_still_toplanned(ctx):
    # Given tenant a's job planned (1,000 tokens) and tenant b's submitted, not planned yet
    a1, b1 = job_in_line(ctx, 1, "a"), job_in_line(ctx, 2, "b", characters=None)
    # Then a1's ETA is unknown: on its own it would say 1 s, but b1 takes half the fleet in a moment
    assert _status(ctx, a1, "a").queue.eta_s is None
    # Once b1 is planned (1,000 tokens too) both share the fleet: 500 tokens/s each, 2 s
    planned(ctx, b1, 4000)
    assert [_status(ctx, job, tenant).queue.eta_s for job, tenant in ((a1, "a"), (b1, "b"))] == [2.0, 2.0]


def test_an_unmeasured_job_counts_at_the_characters_per_token_its_model_showed(ctx):
    # Given a worker that ran 1,000 tokens of 5,000 characters of the model (its latest rate: 1,000 tokens/s)
    ctx.throughput.record("w1", MODEL, "float16", tokens=1000, seconds=1.0, characters=5000)
    job = job_in_line(ctx, 1, "a", characters=4000)
    status = _status(ctx, job, "a")
    # Then its 4,000 characters are 800 tokens (not 1,000 at 4 a token), in the estimate and the ETA alike
    assert (status.estimate.tokens, status.estimate.measured, status.queue.eta_s) == (800, False, 0.8)


def test_the_prior_is_over_the_reports_that_counted_characters_any_worker():
    board = InMemoryThroughputBoard()
    assert chars_per_token(board.rates(MODEL)) is None  # nothing measured: the fixed 4 stands
    board.record("w1", MODEL, "float32", tokens=1000, seconds=1.0, now=1.0)  # no characters: not counted
    board.record("w2", MODEL, "float32", tokens=1000, seconds=1.0, now=1.0, characters=6000)
    board.record("w3", MODEL, "float16", tokens=3000, seconds=1.0, now=1.0, characters=10000)
    assert chars_per_token(board.rates(MODEL)) == 4.0
    stale = MeasuredRate("old", MODEL, "float32", 100.0, 1.0, 1.0)  # an entry written before characters were kept
    assert stale.characters == 0.0


def test_the_prior_leaves_measured_planned_later_and_done_work_alone():
    base = JobStatus(id="j", status=JobState.RUNNING, model=MODEL, task="embed", created_at=START,
                     estimate=JobEstimate(tokens=1000))  # 4,000 characters at 4 a token
    assert with_prior(base, 5.0).estimate.tokens == 800
    assert with_prior(base, None).estimate.tokens == 1000
    measured = base.model_copy(update={"estimate": JobEstimate(tokens=1000, measured=True)})
    assert with_prior(measured, 5.0).estimate.tokens == 1000
    assert with_prior(base.model_copy(update={"estimate": JobEstimate()}), 5.0).estimate.tokens is None
    # never fewer than it already ran
    assert with_prior(base.model_copy(update={"usage": JobUsage(tokens=900)}), 5.0).estimate.tokens == 900
