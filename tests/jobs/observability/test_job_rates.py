"""The pace a status shows: over the running time so far, running shards' progress included."""
from datetime import datetime, timedelta, timezone

from poolq.jobs.observability.job_rates import job_rates
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobCounts, JobEstimate, JobProgress, JobStatus, JobUsage

START = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)


def _status(state=JobState.RUNNING, **fields) -> JobStatus:
    return JobStatus(**{"id": "1" * 32, "status": state, "model": "m", "task": "embed", "created_at": START,
                        "started_at": START, **fields})


def test_a_running_job_counts_what_its_shards_did_so_far_and_projects_the_rest():
    # Given 10 s of running: 30 documents committed, 10 more done by a running shard, of 100
    status = _status(counts=JobCounts(total=100, completed=25, failed=5), usage=JobUsage(tokens=3000),
                     in_progress=JobProgress(documents=10, tokens=1000))
    rates = job_rates(status, now=START + timedelta(seconds=10))
    # Then 4 documents/s and 400 tokens/s, and 60 documents left take 15 s
    assert (rates.documents_per_s, rates.tokens_per_s, rates.eta_s) == (4.0, 400.0, 15.0)


def test_unknown_until_started_and_something_is_done_and_zero_left_once_finished():
    assert job_rates(_status(started_at=None)).tokens_per_s is None
    assert job_rates(_status(counts=JobCounts(total=5)), now=START + timedelta(seconds=3)).eta_s is None
    done = _status(JobState.SUCCEEDED, counts=JobCounts(total=5, completed=5), usage=JobUsage(tokens=50),
                   finished_at=START + timedelta(seconds=5))
    rates = job_rates(done, now=START + timedelta(hours=1))  # the finished time counts, not now
    assert (rates.tokens_per_s, rates.eta_s) == (10.0, 0.0)


def test_the_time_left_counts_tokens_once_some_text_is_tokenized():
    # Given 10 s of running: 4,000 tokens of an estimated 12,000 done, 40 of 100 documents
    status = _status(counts=JobCounts(total=100, completed=30), usage=JobUsage(tokens=3000),
                     in_progress=JobProgress(documents=10, tokens=1000), estimate=JobEstimate(tokens=12_000, measured=True))
    rates = job_rates(status, now=START + timedelta(seconds=10))
    # Then the 8,000 tokens left at 400 tokens/s take 20 s (the documents alone would say 15 s)
    assert (rates.tokens_per_s, rates.eta_s) == (400.0, 20.0)
    # And before any text is tokenized, the estimate (4 characters a token) is not used
    unmeasured = status.model_copy(update={"estimate": JobEstimate(tokens=12_000, measured=False)})
    assert job_rates(unmeasured, now=START + timedelta(seconds=10)).eta_s == 15.0
