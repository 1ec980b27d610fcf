"""What a client polls: a job's status (``GET /v1/jobs/{id}``), with its counts, usage, rates and progress."""
from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from poolq.jobs.spec.dict_access import DictAccessDeprecated
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.reuse_counts import ReuseCounts
from poolq.jobs.spec.sink_config import SinkOutcome
from poolq.jobs.spec.webhook import WebhookOutcome


class JobCounts(BaseModel):
    total: int | None = None  # known once the input has been read
    completed: int = 0
    failed: int = 0
    not_processed: int = 0  # a cancelled job's records that were neither embedded nor failed


class JobUsage(BaseModel):
    """What the model ran for the job, whatever way it ended (docs/http-api.md#usage): the committed
    shards' tokens, a cancelled shard's discarded windows included; repeats and reused texts excluded."""

    tokens: int = 0


class JobRates(BaseModel):
    """Throughput since the job started (running shards' progress included) and the time left at
    that pace; None while unknown (not started, nothing done yet, no total)."""

    tokens_per_s: float | None = None
    documents_per_s: float | None = None
    eta_s: float | None = None


class JobEstimate(BaseModel):
    """The job's tokens in all (what its ETA counts), once planned: what the records tokenized so
    far cost, plus the characters still to go at the characters per token measured on them.
    ``measured``: some of its text has been tokenized (else its characters count at the characters per
    token its model showed on this deployment's earlier shards, 4 before any: jobs/status/token_prior.py)."""

    tokens: int | None = None
    measured: bool = False


class JobProgress(BaseModel):
    """Work the running shards have done and not committed yet (it moves between commits)."""

    documents: int = 0
    tokens: int = 0


class JobPlace(BaseModel):
    """Where an unfinished job stands in fair share (docs/http-api.md#place), from the status cache.
    ``eta_s``: the time left with the fleet shared as fair share shares it (None while a figure it
    needs is unknown: the job is not planned yet, or no live worker has measured its model)."""

    jobs_ahead: int  # its tenant's unfinished jobs submitted before it
    tenant_share: float  # the tenant's part of the fleet now: 1 / tenants with work to run
    fleet_tokens_per_s: float | None = None  # the live compute workers' measured rates for its model, summed
    eta_s: float | None = None


class JobResult(BaseModel):
    manifest_uri: str


LOCAL_TENANT = "local"  # the tenant of in-process runs (`poolq embed`), which have no API keys


class JobStatus(DictAccessDeprecated, BaseModel):
    """What ``GET /v1/jobs/{id}`` returns."""

    id: str
    tenant: str = LOCAL_TENANT
    status: JobState
    model: str
    task: str
    counts: JobCounts = Field(default_factory=JobCounts)
    usage: JobUsage = Field(default_factory=JobUsage)
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    result: JobResult | None = None
    error: str | None = None
    errors_by_code: dict[str, int] = Field(default_factory=dict)  # failed records by error code
    error_samples: list[str] = Field(default_factory=list)  # the first few error messages
    in_progress: JobProgress = Field(default_factory=JobProgress)
    estimate: JobEstimate = Field(default_factory=JobEstimate)  # done so far: usage.tokens + in_progress.tokens
    rates: JobRates = Field(default_factory=JobRates)  # filled in when the status is read (GET /v1/jobs/{id})
    queue: JobPlace | None = None  # while queued or running: filled in when the status is read
    webhook: WebhookOutcome | None = None  # the delivery of its end event, if it names a webhook
    # What content-addressed reuse saved (docs/reuse.md): so far (its committed shards) while the job runs,
    # the manifest's once it ended; None until a unit is counted.
    reuse: ReuseCounts | None = None
    sinks: list[SinkOutcome] | None = None  # a finished job naming a sink: its load's state (docs/sinks/)
