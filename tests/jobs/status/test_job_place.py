"""Where a queued or running job stands: jobs ahead in its tenant, its tenant's share, the fleet's
tokens/s and an ETA with the fleet shared as fair share shares it."""

import pytest
from support.jobs_in_line import MODEL, fleet_of_one, job_in_line

from poolq.jobs.coordination.status_store import UnitCounts
from poolq.jobs.coordination.worker_throughput import MeasuredRate, fleet_tokens_per_s
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.status.current_status import current_status
from poolq.jobs.status.fair_share_eta import Backlog, finish_times
from poolq.worker.local_runner import local_context


@pytest.fixture
def ctx(tmp_path):
    return fleet_of_one(tmp_path / "out")


def _place(ctx, job_id: str, tenant: str):
    return current_status(JobHandle.of_tenant(ctx, job_id, tenant)).queue


def test_two_tenants_three_jobs_the_place_of_each(ctx):
    # Given tenant a's two jobs and then b's one, 1,000 tokens each, on a fleet of 1,000 tokens/s
    a1, a2, b1 = job_in_line(ctx, 1, "a"), job_in_line(ctx, 2, "a"), job_in_line(ctx, 3, "b")
    places = {job: _place(ctx, job, tenant) for job, tenant in ((a1, "a"), (a2, "a"), (b1, "b"))}
    # Then only a2 has a job ahead (b's job is another tenant's), each tenant has half the fleet,
    assert [places[job].jobs_ahead for job in (a1, a2, b1)] == [0, 1, 0]
    assert {place.tenant_share for place in places.values()} == {0.5}
    assert {place.fleet_tokens_per_s for place in places.values()} == {1000.0}
    # and b1 runs at 500 tokens/s (2 s), a's jobs at 250 until b1 ends, then 500: 500 left each at 3 s
    assert [places[job].eta_s for job in (a1, a2, b1)] == [3.0, 3.0, 2.0]


def test_the_eta_counts_what_is_done_and_the_fleet_it_has(ctx):
    job = job_in_line(ctx, 1, "a", characters=8000)  # 2,000 tokens
    ctx.status.note_progress(job, "shard:0", documents=1, tokens=500)
    ctx.status.count_unit(job, "shard:1", UnitCounts(completed=1, tokens=500, characters=2000))
    place = _place(ctx, job, "a")
    # 2,000 - 500 committed - 500 in progress = 1,000 left, alone on the fleet: all of it
    assert (place.jobs_ahead, place.tenant_share, place.eta_s) == (0, 1.0, 1.0)
    ctx.workers.heartbeat("w2", 60.0)  # a second worker, not measured yet: counted at the mean
    assert _place(ctx, job, "a").eta_s == 0.5


def test_a_queued_job_has_its_place_but_no_eta_until_planned(ctx):
    job_in_line(ctx, 1, "a")
    queued = job_in_line(ctx, 2, "a", characters=None)
    place = _place(ctx, queued, "a")
    assert (place.jobs_ahead, place.tenant_share, place.eta_s) == (1, 1.0, None)
    other = job_in_line(ctx, 3, "b", characters=None)  # a tenant whose job is still planning takes its part soon
    assert _place(ctx, other, "b").tenant_share == 0.5


def test_no_place_once_finished_or_cancelling_and_no_eta_without_a_measured_fleet(ctx, tmp_path):
    done, stopping = job_in_line(ctx, 1, "a"), job_in_line(ctx, 2, "a")
    ctx.status.transition(done, JobState.SUCCEEDED)
    ctx.status.transition(stopping, JobState.CANCELLING)
    assert _place(ctx, done, "a") is None and _place(ctx, stopping, "a") is None
    later = job_in_line(ctx, 3, "a")
    assert _place(ctx, later, "a").jobs_ahead == 0  # neither counts any more
    bare = local_context(tmp_path / "bare", Settings())
    job = job_in_line(bare, 1, "a")
    place = _place(bare, job, "a")
    assert (place.fleet_tokens_per_s, place.eta_s) == (None, None)


def test_fluid_fair_share_frees_a_finished_tenant_part_for_the_others():
    # a: one job of 300; b: two of 100 and 400; the fleet 100 tokens/s
    ends = finish_times([Backlog("a1", "a", 300), Backlog("b1", "b", 100), Backlog("b2", "b", 400)], 100.0)
    # b1 at 25/s ends at 4 s (a1 has 100 left then, b2 300); then 50/s each: a1 at 6 s; b2 alone: 200 at 100/s
    assert ends == pytest.approx({"b1": 4.0, "a1": 6.0, "b2": 8.0})
    with pytest.raises(ValueError, match="tokens_per_s must be positive"):
        finish_times([Backlog("a1", "a", 1)], 0.0)


def test_the_fleet_counts_live_workers_only_each_at_its_latest_rate():
    rates = [MeasuredRate("w1", MODEL, "float32", 100.0, 1.0, 1.0), MeasuredRate("w1", MODEL, "float16", 300.0, 1.0, 2.0),
             MeasuredRate("dead", MODEL, "float32", 9000.0, 1.0, 3.0)]
    assert fleet_tokens_per_s(rates, {"w1"}) == 300.0
    assert fleet_tokens_per_s(rates, {"w1", "w2"}) == 600.0  # w2 has not measured it: the others' mean
    assert fleet_tokens_per_s(rates, {"w3"}) is None
