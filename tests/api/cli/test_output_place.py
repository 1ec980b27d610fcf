"""What ``poolq status`` prints of a queued or running job's place (api/cli/output.py)."""
from support.job_statuses import job_status

from poolq.api.cli.output import job_details

RUNNING = {"id": "j", "status": "running", "model": "m", "counts": {"completed": 1, "failed": 0, "total": 9},
           "usage": {"tokens": 3}}


def test_poolq_status_prints_the_place_while_the_job_waits_or_runs():
    place = {"jobs_ahead": 3, "tenant_share": 0.5, "fleet_tokens_per_s": 1200.0, "eta_s": 125.4}
    assert "  place      3 jobs ahead · your share 50 % · ETA 0:02:05" in job_details(job_status({**RUNNING, "queue": place}))
    unknown = {**place, "jobs_ahead": 1, "tenant_share": 1.0, "eta_s": None}
    assert "  place      1 job ahead · your share 100 % · ETA -:--:--" in job_details(job_status({**RUNNING, "queue": unknown}))
    assert not any("place" in line for line in job_details(job_status(RUNNING)))
