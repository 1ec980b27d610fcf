"""A batch's OpenAI status from its records and its job: the table in batch_view.py, row by row."""
from datetime import datetime, timezone

import pytest

from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobCounts, JobStatus
from poolq.products.batches.batch_records import BatchOutcome, BatchRequest, CancelRequest, PreparedInput, window_seconds
from poolq.products.batches.batch_view import batch_view
from poolq.products.batches.openai_objects import BatchError, RequestCounts

CREATED = 1_000_000
REQUEST = BatchRequest(id="batch_" + "0" * 32, endpoint="/v1/embeddings", input_file_id="file-" + "1" * 32,
                       completion_window="1h", created_at=CREATED)
PREPARED = PreparedInput(job_id="a" * 32, model="m", total=10, invalid=2, records=16, prepared_at=CREATED + 5,
                         errors=[BatchError(code="invalid_json", message="line 3: ...", line=3)])


def _job(state: JobState, completed: int = 0, failed: int = 0) -> JobStatus:
    return JobStatus(id="a" * 32, status=state, model="m", task="embed", counts=JobCounts(total=16, completed=completed,
                     failed=failed), created_at=datetime.fromtimestamp(CREATED, timezone.utc),
                     finished_at=datetime.fromtimestamp(CREATED + 50, timezone.utc) if state.is_terminal else None)


def test_validating_until_the_input_is_read():
    view = batch_view(REQUEST, None, None, None, None, now=CREATED + 1)
    assert view.status == "validating" and view.expires_at == CREATED + 3600 and view.in_progress_at is None


def test_in_progress_counts_requests_in_proportion_to_records():
    view = batch_view(REQUEST, PREPARED, None, None, _job(JobState.RUNNING, completed=8, failed=2), now=CREATED + 10)
    assert view.status == "in_progress" and view.in_progress_at == CREATED + 5 and view.poolq_job_id == "a" * 32
    # 8 valid requests make 16 records: 8 records done ~ 4 requests; the 2 invalid lines failed already
    assert view.request_counts == RequestCounts(total=10, completed=4, failed=3)
    assert [e.line for e in view.errors.data] == [3]


@pytest.mark.parametrize("job, now", [(_job(JobState.SUCCEEDED, 16), CREATED + 60), (_job(JobState.RUNNING), CREATED + 3600)])
def test_finalizing_once_the_job_ended_or_the_window_passed(job, now):
    view = batch_view(REQUEST, PREPARED, None, None, job, now=now)
    assert view.status == "finalizing" and view.finalizing_at == (CREATED + 50 if job.status.is_terminal else CREATED + 3600)


def test_cancelling_wins_over_running_and_the_outcome_over_everything():
    cancel = CancelRequest(cancelling_at=CREATED + 20)
    assert batch_view(REQUEST, PREPARED, cancel, None, _job(JobState.RUNNING), now=CREATED + 21).status == "cancelling"
    outcome = BatchOutcome(status="cancelled", counts=RequestCounts(total=10, completed=3, failed=7),
                           output_file_id="file-x", error_file_id="file-y", finished_at=CREATED + 30)
    view = batch_view(REQUEST, PREPARED, cancel, outcome, _job(JobState.CANCELLED), now=CREATED + 31)
    assert (view.status, view.cancelled_at, view.cancelling_at) == ("cancelled", CREATED + 30, CREATED + 20)
    assert (view.output_file_id, view.error_file_id, view.request_counts.completed) == ("file-x", "file-y", 3)


@pytest.mark.parametrize("window, seconds", [("24h", 86400), ("90m", 5400), ("2s", 2), ("168h", 604800)])
def test_completion_windows(window, seconds):
    assert window_seconds(window) == seconds


@pytest.mark.parametrize("window", ["", "24", "0h", "169h", "1d", "24H", " 24h", "-1h", "1.5h"])
def test_completion_windows_refused(window):
    with pytest.raises(ValueError, match="completion_window"):
        window_seconds(window)
