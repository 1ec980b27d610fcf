"""What ``poolq status`` prints for a job's sink loads (api/cli/output.py)."""
import pytest
from support.job_statuses import CREATED_AT, job_status

from poolq.api.cli.output import job_details

JOB = {"id": "j", "status": "succeeded", "model": "m", "counts": {"completed": 1, "failed": 0, "total": 1},
       "usage": {"tokens": 3}}


@pytest.mark.parametrize("sink, line", [
    ({"name": "search", "state": "succeeded", "upserted": 6, "deleted": 1, "unchanged": 3, "error": None},
     "  sink       search succeeded: 6 upserted, 1 deleted, 3 unchanged"),
    ({"name": "search", "state": "failed", "upserted": 0, "deleted": 0, "unchanged": 0, "error": "SinkError: no"},
     "  sink       search failed: SinkError: no"),
    ({"name": "search", "state": "pending", "upserted": 0, "deleted": 0, "unchanged": 0, "error": None},
     "  sink       search pending"),
])
def test_poolq_status_prints_a_line_per_sink(sink, line):
    assert job_details(job_status(JOB))[-1] == f"  created    {CREATED_AT}"
    assert job_details(job_status({**JOB, "sinks": [sink]}))[-1] == line
