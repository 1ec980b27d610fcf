"""Schedules: validation, slots, the store, one job per slot, and RedBeat entries on a real Redis."""
import json
import threading
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
import redis
from pydantic import ValidationError
from redbeat import RedBeatSchedulerEntry
from redbeat.schedulers import ensure_conf

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, SCHEDULE_TASK, CeleryEnqueuer, Enqueuer
from poolq.jobs.coordination.leases import InMemoryLeaseStore
from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.submit import JobRejected
from poolq.products.schedules.beat_entries import ScheduleBeat, entry_name
from poolq.products.schedules.schedule import JobTemplate, Schedule, ScheduleRequest, ScheduleRun, latest_slot, slot_name
from poolq.products.schedules.schedule_admin import create_schedule, delete_schedule
from poolq.products.schedules.schedule_runner import last_good_job, run_schedule
from poolq.products.schedules.schedule_store import ScheduleStore
from poolq.worker.celery_app import create_celery_app
from poolq.worker.local_runner import local_context
from poolq.worker.reconciler import reconcile

UTC = timezone.utc
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


class _HoldingEnqueuer(Enqueuer):
    """Accepts work and never runs it: jobs stay queued."""

    def plan(self, job_id): ...
    def plan_section(self, job_id, stage, section): ...
    def run_shard(self, job_id, shard): ...
    def finalize(self, job_id): ...


def _request(tmp_path, **overrides) -> ScheduleRequest:
    body = {"cron": "* * * * *", "input": {"uri": (tmp_path / "docs").as_uri() + "/"}, **overrides}
    return ScheduleRequest.model_validate(body)


def _holding_ctx(tmp_path, enqueuer=None) -> JobContext:
    base = local_context(tmp_path / "store")
    return replace(base, status=InMemoryJobStatusStore(), leases=InMemoryLeaseStore(), enqueuer=enqueuer or _HoldingEnqueuer())


def _job_ids(ctx) -> list[str]:
    """Every job with a spec in the store: what was really submitted."""
    return sorted({key.split("/")[-2] for key in ctx.store.list("") if key.endswith("/spec.json")})


# -- the model ---------------------------------------------------------------------------------

@pytest.mark.parametrize("cron, message", [
    ("* * * *", "expected 5 fields"),
    ("* * * * * *", "expected 5 fields"),
    ("@daily", "expected 5 fields"),
    ("61 * * * *", "out of range"),
    ("0 0 31 2 *", "invalid cron"),
    ("0 0 * * 7", "not supported by the scheduler"),
    ("0 0 1 * mon", "not both"),
])
def test_a_bad_cron_expression_is_rejected_naming_the_field(tmp_path, cron, message):
    with pytest.raises(ValidationError) as info:
        _request(tmp_path, cron=cron)
    [error] = info.value.errors()
    assert error["loc"] == ("cron",) and message in error["msg"]


def test_cron_is_normalized_and_only_utc_is_accepted(tmp_path):
    assert _request(tmp_path, cron=" */5  3 * * mon-fri ").cron == "*/5 3 * * mon-fri"
    with pytest.raises(ValidationError, match="timezone"):
        _request(tmp_path, timezone="Europe/Paris")


@pytest.mark.parametrize("cron, now, slot", [
    ("* * * * *", T0, T0),  # exactly on a cron time: that time
    ("* * * * *", T0 + timedelta(seconds=59.9), T0),
    ("*/15 * * * *", T0 + timedelta(minutes=14, seconds=59), T0),
    ("0 3 * * *", T0, T0.replace(hour=3)),
    ("0 3 * * *", T0.replace(hour=2), T0.replace(day=30, month=4, hour=3)),
])
def test_the_slot_is_the_latest_cron_time_at_or_before_now(cron, now, slot):
    assert latest_slot(cron, now) == slot
    assert latest_slot(cron, now.astimezone(timezone(timedelta(hours=2)))) == slot  # any zone in, UTC out


def test_the_template_holds_every_job_field_but_the_input(tmp_path):
    # webhook: the schedule's own field, given to each run's job
    assert set(JobTemplate.model_fields) == set(JobSpec.model_fields) - {"input", "incremental_from", "webhook"}
    schedule = Schedule(id="a" * 32, created_at=T0, **dict(_request(tmp_path, template={"model": "all-MiniLM-L6-v2"})))
    spec = schedule.job_spec(incremental_from="b" * 32)
    assert spec.input.uri.endswith("/docs/") and spec.incremental_from == "b" * 32


# -- the store ---------------------------------------------------------------------------------

def test_the_store_keeps_schedules_and_one_run_record_per_slot(tmp_path):
    ctx = _holding_ctx(tmp_path)
    store = ScheduleStore(ctx.store, ctx.service_layout)
    schedule = Schedule(id="a" * 32, created_at=T0, **dict(_request(tmp_path)))
    store.create(schedule)
    assert store.get(schedule.id) == schedule and store.list() == [schedule] and store.get("b" * 32) is None
    # The first claim of a slot wins; a later one gets the first
    first = store.claim_run(ScheduleRun(schedule_id=schedule.id, slot=T0, incremental_from=None))
    second = store.claim_run(ScheduleRun(schedule_id=schedule.id, slot=T0, incremental_from="c" * 32))
    assert second == first and second.incremental_from is None
    store.record_job(first, "d" * 32)
    assert store.run(schedule.id, T0).job_id == "d" * 32
    assert slot_name(T0) == "20240501T120000Z"
    assert ctx.store.exists(f"_schedule_runs/{schedule.id}/20240501T120000Z.json")
    # Runs are listed newest first, pruned to the newest ones, deleted with the schedule
    for minute in range(1, 5):
        store.claim_run(ScheduleRun(schedule_id=schedule.id, slot=T0 + timedelta(minutes=minute)))
    assert [run.slot.minute for run in store.runs(schedule.id, limit=3)] == [4, 3, 2]
    assert store.prune_runs(schedule.id, keep=2) == 3 and len(store.runs(schedule.id)) == 2
    assert store.delete(schedule.id) and store.list() == [] and store.runs(schedule.id) == []
    assert not store.delete(schedule.id)


# -- one job per slot --------------------------------------------------------------------------

def test_a_duplicated_trigger_gives_one_job_per_slot(tmp_path):
    ctx = _holding_ctx(tmp_path)
    schedule = create_schedule(ctx, _request(tmp_path))
    # Two beats (or a redelivered message) trigger the same minute twice
    first = run_schedule(ctx, schedule.id, now=T0 + timedelta(seconds=1))
    again = run_schedule(ctx, schedule.id, now=T0 + timedelta(seconds=40))
    assert first.job_id == again.job_id and first.slot == T0
    assert _job_ids(ctx) == [first.job_id]
    # The next minute is the next slot: a second job
    later = run_schedule(ctx, schedule.id, now=T0 + timedelta(minutes=1, seconds=2))
    assert later.job_id != first.job_id and _job_ids(ctx) == sorted([first.job_id, later.job_id])
    assert [run.job_id for run in ScheduleStore(ctx.store, ctx.service_layout).runs(schedule.id)] == [later.job_id, first.job_id]


def test_concurrent_triggers_of_one_slot_submit_one_job(tmp_path):
    ctx = _holding_ctx(tmp_path)
    schedule = create_schedule(ctx, _request(tmp_path))
    results, barrier = [], threading.Barrier(8)

    def trigger(second: int) -> None:
        barrier.wait()
        results.append(run_schedule(ctx, schedule.id, now=T0 + timedelta(seconds=second)))

    threads = [threading.Thread(target=trigger, args=(second,)) for second in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({run.job_id for run in results}) == 1 and len(_job_ids(ctx)) == 1


def test_each_run_is_incremental_from_the_last_successful_one(tmp_path, minilm_engine):
    # Given a schedule over a real input, run in process (jobs finish inside the trigger)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.jsonl").write_text(json.dumps({"id": "a", "text": "a short document"}) + "\n")
    ctx = local_context(tmp_path / "store")
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    schedule = create_schedule(ctx, _request(tmp_path))
    store = ScheduleStore(ctx.store, ctx.service_layout)
    first = run_schedule(ctx, schedule.id, now=T0)
    assert first.incremental_from is None and ctx.status.get(first.job_id).status is JobState.SUCCEEDED
    second = run_schedule(ctx, schedule.id, now=T0 + timedelta(minutes=1))
    assert second.incremental_from == first.job_id
    assert json.loads(ctx.store.get(JobHandle.bind(ctx, second.job_id).layout.manifest))["counts"]["carried"] == 1
    # A failed run is skipped when looking for the baseline
    manifest_key = JobHandle.bind(ctx, second.job_id).layout.manifest
    ctx.store.put(manifest_key, json.dumps({**json.loads(ctx.store.get(manifest_key)), "status": "failed"}).encode())
    assert last_good_job(ctx, schedule.id, T0 + timedelta(minutes=2), store) == first.job_id
    # A manual run has its own slot (this second) and is incremental too
    manual = run_schedule(ctx, schedule.id, now=T0 + timedelta(minutes=2, seconds=30.5), manual=True)
    assert manual.slot == T0 + timedelta(minutes=2, seconds=30) and manual.manual and manual.incremental_from == first.job_id


def test_disabled_and_deleted_schedules_do_not_run_on_their_own(tmp_path):
    ctx = _holding_ctx(tmp_path)
    schedule = create_schedule(ctx, _request(tmp_path, enabled=False))
    assert run_schedule(ctx, schedule.id, now=T0) is None and _job_ids(ctx) == []
    assert run_schedule(ctx, schedule.id, now=T0, manual=True).job_id is not None  # by hand it runs
    assert delete_schedule(ctx, schedule.id) and not delete_schedule(ctx, schedule.id)
    assert run_schedule(ctx, schedule.id, now=T0) is None and run_schedule(ctx, schedule.id, now=T0, manual=True) is None


def test_a_template_the_server_cannot_run_is_rejected_naming_the_field(tmp_path):
    ctx = _holding_ctx(tmp_path)
    with pytest.raises(JobRejected) as info:
        create_schedule(ctx, _request(tmp_path, template={"model": "no-such-model"}))
    assert info.value.field == "template.model"
    with pytest.raises(JobRejected) as info:
        create_schedule(ctx, _request(tmp_path, input={"uri": "s3://bucket/"}))
    assert info.value.field == "input.uri"
    assert ScheduleStore(ctx.store, ctx.service_layout).list() == []


def test_runs_are_pruned_to_the_newest(tmp_path, monkeypatch):
    monkeypatch.setattr("poolq.products.schedules.schedule_runner.MAX_RUNS_KEPT", 3)
    ctx = _holding_ctx(tmp_path)
    schedule = create_schedule(ctx, _request(tmp_path))
    for minute in range(5):
        run_schedule(ctx, schedule.id, now=T0 + timedelta(minutes=minute))
    runs = ScheduleStore(ctx.store, ctx.service_layout).runs(schedule.id)
    assert [run.slot.minute for run in runs] == [4, 3, 2]
    assert len(_job_ids(ctx)) == 5  # the jobs stay


# -- RedBeat entries on a real Redis -----------------------------------------------------------

@pytest.fixture
def celery_app(redis_url):
    url = redis_url.rsplit("/", 1)[0] + "/5"  # a database of its own
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield create_celery_app(Settings(redis_url=url))
    client.flushdb()


def _entry(app, schedule_id):
    return RedBeatSchedulerEntry.from_key(ensure_conf(app).key_prefix + entry_name(schedule_id), app=app)


def test_creating_a_schedule_adds_a_redbeat_entry_that_fires_at_the_next_cron_time(tmp_path, celery_app):
    ctx = _holding_ctx(tmp_path, CeleryEnqueuer(celery_app))
    before = datetime.now(UTC)
    schedule = create_schedule(ctx, _request(tmp_path, cron="*/10 * * * *"))
    entry = _entry(celery_app, schedule.id)
    assert entry.task == SCHEDULE_TASK and entry.args == [schedule.id] and entry.options["queue"] == CONTROL_QUEUE
    assert (entry.schedule._orig_minute, entry.schedule._orig_hour) == ("*/10", "*") and entry.enabled
    # Not at once: at the next */10 minute after its creation
    next_slot = latest_slot("*/10 * * * *", before) + timedelta(minutes=10)
    assert abs((entry.due_at - next_slot).total_seconds()) < 2 and not entry.is_due()[0]
    assert delete_schedule(ctx, schedule.id)
    with pytest.raises(KeyError):
        _entry(celery_app, schedule.id)


def test_sync_recreates_lost_entries_and_removes_orphans(tmp_path, celery_app):
    ctx = _holding_ctx(tmp_path, CeleryEnqueuer(celery_app))
    kept = create_schedule(ctx, _request(tmp_path))
    lost = create_schedule(ctx, _request(tmp_path, enabled=False))
    beat = ScheduleBeat(celery_app)
    # Redis loses one entry, and holds one for a schedule that no longer exists
    _entry(celery_app, lost.id).delete()
    orphan = Schedule(id="f" * 32, created_at=T0, **dict(_request(tmp_path)))
    beat.add(orphan)
    marker = _entry(celery_app, kept.id)
    marker.reschedule(T0)  # an existing entry's state must survive the sync
    assert beat.schedule_ids() == {kept.id, orphan.id}
    # The reconciler's pass re-syncs them from the stored schedules
    reconcile(ctx)
    assert beat.schedule_ids() == {kept.id, lost.id}
    assert _entry(celery_app, kept.id).last_run_at == T0 and not _entry(celery_app, lost.id).enabled
    # A whole Redis wipe: everything comes back
    redis.Redis.from_url(celery_app.conf.redbeat_redis_url).flushdb()
    assert beat.sync(ScheduleStore(ctx.store, ctx.service_layout)).added == sorted([kept.id, lost.id])
    assert beat.schedule_ids() == {kept.id, lost.id}


# -- slots beat missed ---------------------------------------------------------------------------

def _reconcile_at(ctx, at: datetime):
    return reconcile(ctx, now=at.timestamp())


def test_a_slot_beat_missed_is_run_once_by_the_reconciler_after_a_grace_period(tmp_path):
    # Given an hourly schedule created before the 12:00 slot, and no beat firing it
    ctx = _holding_ctx(tmp_path)
    schedule = create_schedule(ctx, _request(tmp_path, cron="0 * * * *"), now=T0 - timedelta(minutes=10))
    # When the reconciler passes within the grace period, beat may still fire it: nothing runs
    assert _reconcile_at(ctx, T0 + timedelta(minutes=1)).caught_up == [] and _job_ids(ctx) == []
    # When it passes after the grace period, the slot runs, once
    assert _reconcile_at(ctx, T0 + timedelta(minutes=5)).caught_up == [schedule.id]
    assert _reconcile_at(ctx, T0 + timedelta(minutes=6)).caught_up == []
    [job_id] = _job_ids(ctx)
    [run] = ScheduleStore(ctx.store, ctx.service_layout).runs(schedule.id)
    assert (run.slot, run.job_id, run.manual) == (T0, job_id, False)
    # Then a late beat for the same slot lands on the same job
    assert run_schedule(ctx, schedule.id, now=T0 + timedelta(minutes=7)).job_id == job_id


def test_after_an_outage_over_several_slots_only_the_latest_runs(tmp_path):
    ctx = _holding_ctx(tmp_path)
    schedule = create_schedule(ctx, _request(tmp_path, cron="0 * * * *"), now=T0 - timedelta(minutes=10))
    _reconcile_at(ctx, T0 + timedelta(hours=3, minutes=5))  # 12:00, 13:00, 14:00 and 15:00 were missed
    assert [run.slot for run in ScheduleStore(ctx.store, ctx.service_layout).runs(schedule.id)] == [T0 + timedelta(hours=3)]
    assert len(_job_ids(ctx)) == 1


def test_disabled_schedules_and_slots_before_a_schedule_existed_are_not_caught_up(tmp_path):
    ctx = _holding_ctx(tmp_path)
    create_schedule(ctx, _request(tmp_path, cron="0 * * * *", enabled=False), now=T0 - timedelta(minutes=10))
    create_schedule(ctx, _request(tmp_path, cron="0 * * * *"), now=T0 + timedelta(minutes=30))  # after 12:00
    assert _reconcile_at(ctx, T0 + timedelta(minutes=45)).caught_up == []
    assert _job_ids(ctx) == []


class _ListingStore:
    """The context's store, recording the prefixes it lists."""

    def __init__(self, store) -> None:
        self._store, self.listed = store, []

    def __getattr__(self, name):
        return getattr(self._store, name)

    def list(self, prefix, *args, **kwargs):
        self.listed.append(prefix)
        return self._store.list(prefix, *args, **kwargs)


def test_with_beat_the_reconciler_lists_the_schedules_once_and_still_catches_up(tmp_path, celery_app):
    # Given a schedule whose 12:00 slot beat missed, in a context that sends work through Celery
    ctx = _holding_ctx(tmp_path, CeleryEnqueuer(celery_app))
    schedule = create_schedule(ctx, _request(tmp_path, cron="0 * * * *"), now=T0 - timedelta(minutes=10))
    store = _ListingStore(ctx.store)
    ctx.store = store
    # When one pass runs: the beat sync, then the catch-up of missed slots
    assert _reconcile_at(ctx, T0 + timedelta(minutes=5)).caught_up == [schedule.id]
    # Then the stored schedules were listed once, for both
    assert store.listed.count(ctx.service_layout.schedules_prefix) == 1
