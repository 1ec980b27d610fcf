"""Jobs: the job model, its steps (submit, plan, shards, finalize) and the Celery edge."""
from poolq.jobs.job import JobSpec, JobState, JobStatus
from poolq.jobs.settings import Settings

__all__ = ["JobSpec", "JobState", "JobStatus", "Settings"]
