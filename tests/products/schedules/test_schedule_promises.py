"""docs/schedules.md's promises, checked against the runner: a run by hand and a cron run are two runs."""
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from support.job_doubles import RecordingEnqueuer

from poolq.jobs.coordination.leases import InMemoryLeaseStore
from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.products.schedules.schedule import ScheduleRequest
from poolq.products.schedules.schedule_admin import create_schedule
from poolq.products.schedules.schedule_runner import recent_runs, run_schedule
from poolq.worker.local_runner import local_context

SLOT = datetime(2024, 5, 1, 3, 0, 0, tzinfo=timezone.utc)


def test_run_now_in_the_first_second_of_a_cron_slot_does_not_swallow_the_cron_run(tmp_path):
    base = local_context(tmp_path / "store")
    # its jobs stay queued: the enqueuer records them, nothing runs them
    ctx = replace(base, status=InMemoryJobStatusStore(), leases=InMemoryLeaseStore(), enqueuer=RecordingEnqueuer())
    request = ScheduleRequest.model_validate({"cron": "0 3 * * *", "input": {"uri": (tmp_path / "docs").as_uri() + "/"}})
    schedule = create_schedule(ctx, request, now=SLOT - timedelta(days=1))
    # Given a click on "run now" at 03:00:00.2, then beat's 03:00 trigger handled at 03:00:00.6
    by_hand = run_schedule(ctx, schedule.id, SLOT + timedelta(seconds=0.2), manual=True)
    on_schedule = run_schedule(ctx, schedule.id, SLOT + timedelta(seconds=0.6))
    # Then the slot still has its cron run, not the click's job recorded as "by hand"
    assert not on_schedule.manual, "the 03:00 cron run was answered with the manual run's record"
    assert on_schedule.job_id != by_hand.job_id
    assert sorted(run.manual for run in recent_runs(ctx, schedule.id)) == [False, True]
