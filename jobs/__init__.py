"""Jobs: the job model, its steps (submit, plan, shards, finalize) and the Celery edge."""
from poolq.jobs.model.job_spec import JobSpec
from poolq.jobs.model.job_state import JobState
from poolq.jobs.model.job_status import JobStatus
from poolq.jobs.settings import Settings

__all__ = ["JobSpec", "JobState", "JobStatus", "Settings"]
