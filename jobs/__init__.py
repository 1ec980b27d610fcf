"""Jobs: the job model, its steps (submit, plan, shards, finalize) and the Celery edge."""
from .job import JobSpec, JobState, JobStatus
from .settings import Settings

__all__ = ["JobSpec", "JobState", "JobStatus", "Settings"]
