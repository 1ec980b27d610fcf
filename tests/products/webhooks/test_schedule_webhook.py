"""A schedule's webhook: checked against the allow-list when the schedule is made, given to every run's job."""
import pytest

from poolq.jobs.settings import Settings
from poolq.jobs.steps.submit import JobRejected
from poolq.products.schedules.schedule import ScheduleRequest
from poolq.products.schedules.schedule_admin import create_schedule
from poolq.worker.local_runner import local_context

INPUT = {"uri": "s3://poolq/tenants/local/uploads/"}  # the tenant's own uploads (local runs: no prefix)


def _ctx(tmp_path):
    return local_context(tmp_path / "out", Settings(webhook_allow="https://hooks.example.com/poolq"))


def test_every_run_of_a_schedule_carries_its_webhook(tmp_path):
    request = ScheduleRequest.model_validate({"cron": "0 3 * * *", "input": INPUT,
                                              "webhook": {"url": "https://hooks.example.com/poolq/nightly"}})
    schedule = create_schedule(_ctx(tmp_path), request)
    assert schedule.job_spec(incremental_from=None).webhook.url == "https://hooks.example.com/poolq/nightly"


def test_a_schedule_whose_webhook_is_not_allowed_is_refused_naming_webhook_url(tmp_path):
    request = ScheduleRequest.model_validate({"cron": "0 3 * * *", "input": INPUT,
                                              "webhook": {"url": "https://hooks.example.com/other"}})
    with pytest.raises(JobRejected) as refused:
        create_schedule(_ctx(tmp_path), request)
    assert refused.value.field == "webhook.url" and "allow-list" in str(refused.value)
