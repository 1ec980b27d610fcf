"""One contract for the job status store: Redis (real server) and the in-memory one."""
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import pytest
import redis

from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.coordination.redis_status_store import RedisJobStatusStore
from poolq.jobs.coordination.status_store import UnitCounts
from poolq.jobs.ledger.error_summary import ErrorSummary
from poolq.jobs.spec.job_state import TRANSITIONS, JobState
from poolq.jobs.spec.job_status import JobStatus
from poolq.jobs.spec.reuse_counts import ReuseCounts
from poolq.jobs.spec.sink_config import SinkOutcome, sink_outcomes_json


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def status_store(request):
    if request.param == "memory":
        return InMemoryJobStatusStore()
    return RedisJobStatusStore(redis.Redis.from_url(request.getfixturevalue("redis_url")))


def _status(job_id: str, state: JobState = JobState.QUEUED) -> JobStatus:
    return JobStatus(id=job_id, status=state, model="m", task="embed", created_at=datetime.now(timezone.utc))


def _new_job(store) -> str:
    job_id = uuid.uuid4().hex
    assert store.create(_status(job_id))
    return job_id


def test_unknown_job_is_none(status_store):
    assert status_store.get("nope") is None


def test_create_is_once_only(status_store):
    job_id = _new_job(status_store)
    assert status_store.transition(job_id, JobState.RUNNING)
    assert not status_store.create(_status(job_id))  # a repeated submission does not reset it
    assert status_store.get(job_id).status is JobState.RUNNING


def test_update_sets_plain_fields_but_never_the_state(status_store):
    job_id = _new_job(status_store)
    status_store.update(job_id, total=5, manifest_uri="s3://b/k/manifest.json")
    job = status_store.get(job_id)
    assert (job.status, job.counts.total, job.result.manifest_uri) == (JobState.QUEUED, 5, "s3://b/k/manifest.json")
    with pytest.raises(ValueError, match="transition"):
        status_store.update(job_id, status=JobState.SUCCEEDED)


def test_a_status_keeps_its_sink_loads_created_or_updated(status_store):
    pending = SinkOutcome(name="search", state="pending")
    job_id = uuid.uuid4().hex
    assert status_store.create(_status(job_id).model_copy(update={"sinks": [pending]}))
    assert status_store.get(job_id).sinks == [pending]
    loaded = SinkOutcome(name="search", state="succeeded", upserted=5, finished_at=datetime.now(timezone.utc))
    status_store.update(job_id, sinks=sink_outcomes_json([loaded]))
    assert status_store.get(job_id).sinks == [loaded]
    assert status_store.get(_new_job(status_store)).sinks is None


def test_reuse_is_what_the_counted_units_saved_until_the_manifests_counts_are_set(status_store):
    job_id = _new_job(status_store)
    assert status_store.get(job_id).reuse is None  # nothing counted yet
    status_store.count_unit(job_id, "shard-0", UnitCounts(completed=3, tokens=40, reused_documents=2, reused_tokens=30))
    status_store.count_unit(job_id, "shard-1", UnitCounts(completed=2, tokens=25, reused_documents=1, reused_tokens=9))
    status_store.count_unit(job_id, "shard-1", UnitCounts(completed=2, tokens=25, reused_documents=1, reused_tokens=9))  # again
    assert status_store.get(job_id).reuse == ReuseCounts(reused_documents=3, reused_tokens=39, computed_tokens=65)
    status_store.set_counts(job_id, ["shard-0"],
                            UnitCounts(completed=3, failed=0, tokens=40, reused_documents=2, reused_tokens=30))
    assert status_store.get(job_id).reuse == ReuseCounts(reused_documents=2, reused_tokens=30, computed_tokens=40)
    final = ReuseCounts(reused_documents=5, reused_tokens=50, computed_tokens=70)
    status_store.update(job_id, reuse=final.model_dump_json())  # the manifest's, once the job ended
    assert status_store.get(job_id).reuse == final


@pytest.mark.parametrize("source", list(JobState))
def test_transitions_follow_the_table_and_terminal_states_never_change(status_store, source):
    for target in JobState:
        job_id = uuid.uuid4().hex
        status_store.create(_status(job_id, source))
        moved = status_store.transition(job_id, target, error="x")
        assert moved == (target in TRANSITIONS[source]), (source, target)
        assert status_store.get(job_id).status is (target if moved else source)


def test_concurrent_transitions_let_exactly_one_win(status_store):
    job_id = _new_job(status_store)
    status_store.transition(job_id, JobState.RUNNING)
    targets = [JobState.SUCCEEDED, JobState.CANCELLING, JobState.FAILED, JobState.PARTIALLY_SUCCEEDED] * 10
    with ThreadPoolExecutor(8) as pool:
        wins = [t for t, won in zip(targets, pool.map(lambda t: status_store.transition(job_id, t), targets)) if won]
    assert len(wins) == 1
    assert status_store.get(job_id).status is wins[0]


def test_advance_to_walks_through_intermediate_states(status_store):
    queued, running = _new_job(status_store), _new_job(status_store)
    status_store.transition(running, JobState.RUNNING)
    assert status_store.advance_to(queued, JobState.SUCCEEDED)  # queued -> running -> succeeded
    assert status_store.advance_to(running, JobState.CANCELLED)  # running -> cancelling -> cancelled
    assert not status_store.advance_to(queued, JobState.FAILED)  # terminal: stays succeeded
    assert [status_store.get(j).status for j in (queued, running)] == [JobState.SUCCEEDED, JobState.CANCELLED]


def test_a_unit_counts_once_however_often_it_is_reported(status_store):
    job_id = _new_job(status_store)
    units = [f"shard-{i % 20:05d}" for i in range(200)]  # each unit reported 10 times, concurrently
    with ThreadPoolExecutor(8) as pool:
        counted = list(pool.map(lambda u: status_store.count_unit(job_id, u, UnitCounts(completed=3, failed=1, tokens=7)), units))
    assert max(counted) == 20
    job = status_store.get(job_id)
    assert (job.counts.completed, job.counts.failed, job.usage.tokens) == (60, 20, 140)


def test_set_counts_replaces_counters_and_counted_units(status_store):
    job_id = _new_job(status_store)
    status_store.count_unit(job_id, "shard-00000", UnitCounts(completed=9))
    status_store.set_counts(job_id, ["plan", "shard-00001"], UnitCounts(completed=4, failed=2, tokens=10))
    assert status_store.count_unit(job_id, "shard-00001", UnitCounts(completed=100)) == 2  # already counted
    assert status_store.count_unit(job_id, "shard-00000", UnitCounts(completed=1)) == 3
    job = status_store.get(job_id)
    assert (job.counts.completed, job.counts.failed, job.usage.tokens) == (5, 2, 10)


def test_errors_by_code_count_once_per_unit_and_the_first_samples_stay(status_store):
    job_id = _new_job(status_store)
    first = ErrorSummary({"missing_text": 2}, ("line 3: no text", "line 9: no text"))
    for _ in range(3):  # a redelivered commit
        status_store.count_unit(job_id, "shard-00000", UnitCounts(failed=2), errors=first)
    status_store.count_unit(job_id, "shard-00001", UnitCounts(failed=1),
                            errors=ErrorSummary({"missing_text": 1, "invalid_json": 1}, ("line 1: bad",)))
    job = status_store.get(job_id)
    assert job.errors_by_code == {"missing_text": 3, "invalid_json": 1}
    assert job.error_samples == ["line 3: no text", "line 9: no text"]
    # The ledger's totals replace them (recovery, finalization)
    status_store.set_counts(job_id, ["plan"], UnitCounts(completed=0, failed=1, tokens=0),
                            errors=ErrorSummary({"x": 1}, ("line 2",)))
    job = status_store.get(job_id)
    assert job.errors_by_code == {"x": 1} and job.error_samples == ["line 2"]


def test_a_running_units_progress_shows_until_it_is_counted(status_store):
    job_id = _new_job(status_store)
    status_store.note_progress(job_id, "shard-00000", 5, 50)
    status_store.note_progress(job_id, "shard-00001", 2, 20)
    status_store.note_progress(job_id, "shard-00000", 7, 70)  # later reports replace earlier ones
    assert status_store.get(job_id).in_progress.model_dump() == {"documents": 9, "tokens": 90}
    status_store.count_unit(job_id, "shard-00000", UnitCounts(completed=8, tokens=80))
    status_store.note_progress(job_id, "shard-00000", 7, 70)  # a late report of a counted unit is ignored
    job = status_store.get(job_id)
    assert job.in_progress.model_dump() == {"documents": 2, "tokens": 20} and job.counts.completed == 8
    status_store.note_progress("f" * 32, "shard-00000", 1, 1)  # a job without a status is never created
    assert status_store.get("f" * 32) is None
    status_store.set_counts(job_id, ["plan", "shard-00000", "shard-00001"], UnitCounts(completed=10, failed=0, tokens=100))
    assert status_store.get(job_id).in_progress.documents == 0


def test_dispatch_times_are_kept_until_forgotten(status_store):
    job_id = _new_job(status_store)
    status_store.note_dispatch(job_id, ["plan", "shard-00000"], 100.0)
    status_store.note_dispatch(job_id, ["shard-00000"], 200.0)
    assert status_store.dispatches(job_id) == {"plan": 100.0, "shard-00000": 200.0}
    status_store.forget(job_id)
    assert status_store.dispatches(job_id) == {}


# -- the active-job cap: one atomic reservation -------------------------------------------------
def test_concurrent_reservations_never_pass_the_cap(status_store):
    # Given a tenant with a cap of 5, When 40 submissions reserve at once
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    ids = [uuid.uuid4().hex for _ in range(40)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda job_id: status_store.reserve_active(tenant, job_id, 5, 1000.0), ids))
    # Then exactly 5 got a place, and the others were told the tenant has 5 unfinished jobs
    assert answers.count(None) == 5 and set(answers) - {None} == {5}
    assert len(status_store.active_ids(tenant)) == 5


def test_a_reservation_is_idempotent_and_finished_jobs_free_their_place(status_store):
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    first, second = _new_job(status_store), _new_job(status_store)
    assert status_store.reserve_active(tenant, first, 1, 1000.0) is None
    assert status_store.reserve_active(tenant, first, 1, 1000.0) is None  # the same job again: still its place
    assert status_store.reserve_active(tenant, second, 1, 1000.0) == 1
    status_store.advance_to(first, JobState.SUCCEEDED)
    assert status_store.reserve_active(tenant, second, 1, 1000.0) is None  # the finished one was pruned
    assert status_store.active_ids(tenant) == [second]


def test_a_reservation_without_a_status_expires_after_the_grace_period(status_store):
    from poolq.jobs.coordination.status_store import RESERVATION_GRACE_S

    tenant = f"t-{uuid.uuid4().hex[:8]}"
    died, later = uuid.uuid4().hex, uuid.uuid4().hex  # `died` never got a status: its submission died
    assert status_store.reserve_active(tenant, died, 1, 1000.0) is None
    assert status_store.reserve_active(tenant, later, 1, 1000.0 + RESERVATION_GRACE_S / 2) == 1  # still reserved
    assert status_store.reserve_active(tenant, later, 1, 1000.0 + RESERVATION_GRACE_S + 1) is None
    assert status_store.active_ids(tenant) == [later]


def test_a_finished_jobs_cached_state_expires(status_store):
    job_id = _new_job(status_store)
    status_store.count_unit(job_id, "shard-00000", UnitCounts(completed=1))
    status_store.note_dispatch(job_id, ["shard-00001"], 1.0)
    status_store.expire(job_id, 60)
    if isinstance(status_store, RedisJobStatusStore):
        keys = [f"poolq:job:{job_id}", f"poolq:job:{job_id}:units", f"poolq:job:{job_id}:dispatch"]
        assert all(0 < status_store.redis.ttl(key) <= 60 for key in keys)
    assert status_store.get(job_id) is not None  # still readable until then


def test_a_counted_units_send_time_is_dropped(status_store):
    job_id = _new_job(status_store)
    status_store.note_dispatch(job_id, ["shard-00000", "shard-00001"], 5.0)
    status_store.drop_dispatch(job_id, "shard-00000")
    assert status_store.dispatches(job_id) == {"shard-00001": 5.0}
