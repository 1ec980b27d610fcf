"""Reindex schedules: a cron expression, an input (object or prefix) and a job template.

Every cron time is a *slot*; a schedule runs at most one job per slot (see
``schedule_runner``). Only standard 5-field cron in UTC is accepted, and only what both
croniter (slots) and Celery's crontab (RedBeat, which fires them) read the same way.

Every run reads its input whole, as it is then: a prefix is one corpus whose objects are its
versions (``ScheduleInput``), and the previous run is the baseline, so only what is new or
changed is embedded while each run's output is the whole corpus (docs/schedules.md).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Literal

from celery.schedules import crontab
from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, field_validator

from poolq.engine import DEFAULT_MODEL
from poolq.engine.loading.registry import MAX_MODEL_NAME_CHARS
from poolq.jobs.spec.dict_access import DictAccessDeprecated
from poolq.jobs.spec.job_spec import (
    ComputeDtype,
    JobLimits,
    JobSpec,
    JobTasks,
    LongDocuments,
    OutputOptions,
    PromptOptions,
    ReuseMode,
    ScoreMode,
    UriInput,
)
from poolq.jobs.spec.job_status import LOCAL_TENANT
from poolq.jobs.spec.sink_config import SinkName
from poolq.jobs.spec.webhook import WebhookTarget

CRON_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
SLOT_NAME_FORMAT = "%Y%m%dT%H%M%SZ"


class JobTemplate(PromptOptions):
    """The job a schedule submits, besides its input: JobSpec's other fields (the prompt too; an unpinned Hub
    id is pinned anew at each run, whose engine identity then says whether the model's files changed)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(DEFAULT_MODEL, min_length=1, max_length=MAX_MODEL_NAME_CHARS)
    task: JobTasks = "embed"
    score_mode: ScoreMode = "auto"
    output: OutputOptions = Field(default_factory=OutputOptions)
    long_documents: LongDocuments = Field(default_factory=LongDocuments)
    sink: SinkName | None = None  # every run loads into it, keeping the store in sync (docs/sinks/)
    compute_dtype: ComputeDtype = "auto"  # pin it where workers' dtypes differ: runs carry rows of one dtype
    allow_mixed_engines: bool = False
    reuse: ReuseMode = "job"  # tenant: every run copies what an earlier run (or job) computed (docs/reuse.md)
    limits: JobLimits | None = None  # every run's token budget (docs/budgets.md)


class ScheduleInput(UriInput):
    """A schedule's input. Its prefix is one corpus that grows between runs (a tenant's uploads,
    each re-sending some documents): a newer object's record replaces an older one's with its id,
    where a job's prefix by default fails the repeat as ``duplicate_id`` (docs/schedules.md)."""

    supersede: bool = Field(True, description="objects read oldest first (last-modified, then key); an object's "
                            "record replaces older objects' with its id (counted as superseded, not failed); a repeat "
                            "within one object is still a duplicate_id. false: every repeat fails, as in a job")


class ScheduleRequest(BaseModel):
    """The body of ``POST /v1/schedules``."""

    model_config = ConfigDict(extra="forbid")

    cron: str = Field(description="5-field cron expression, UTC (minute hour day-of-month month day-of-week)")
    timezone: Literal["UTC"] = "UTC"
    input: ScheduleInput = Field(description="s3://bucket/key.jsonl, or s3://bucket/prefix/ for every *.jsonl under it")
    template: JobTemplate = Field(default_factory=JobTemplate)
    enabled: bool = Field(True, description="false: never fires on its own (runs only when triggered)")
    webhook: WebhookTarget | None = Field(None, description="where every run's job POSTs its signed events")

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        return validate_cron(value)


class Schedule(DictAccessDeprecated, ScheduleRequest):
    """A stored schedule; its runs are jobs of ``tenant``."""

    id: str
    tenant: str = LOCAL_TENANT
    created_at: datetime

    def job_spec(self, incremental_from: str | None) -> JobSpec:
        """The job of one run: the template, the input, and the run to carry documents from (a score
        job's runs score everything again: carried pairs would keep stale ranks)."""
        carry_from = None if self.template.task == "score" else incremental_from
        job_input = UriInput.model_validate(self.input.model_dump())  # the job's own input type, supersede as set
        return JobSpec(input=job_input, incremental_from=carry_from, webhook=self.webhook, **dict(self.template))

    def slot_at(self, now: datetime) -> datetime:
        """The slot a trigger at ``now`` belongs to: the latest cron time at or before it."""
        return latest_slot(self.cron, now)


MANUAL_SUFFIX = "-manual"  # ends a run by hand's record name (after its slot's: names still sort by time)


class ScheduleRun(BaseModel):
    """What one (schedule, slot) ran. Claimed before its job exists, so every racer submits the
    same job (same ``incremental_from``); ``job_id`` is filled in once the job is submitted."""

    schedule_id: str
    slot: datetime
    incremental_from: str | None = None
    job_id: str | None = None
    manual: bool = False

    @property
    def slot_name(self) -> str:
        """Its record's name: a run by hand has its own (a click in a cron time's first second is
        not that slot's cron run), sorted after the cron run of the same second."""
        return slot_name(self.slot) + (MANUAL_SUFFIX if self.manual else "")

    @property
    def idempotency_key(self) -> str:
        return f"schedule:{self.schedule_id}:{self.slot.isoformat()}" + (":manual" if self.manual else "")


def validate_cron(expression: str) -> str:
    """Return ``expression`` normalized (single spaces) or raise ValueError saying what is wrong."""
    fields = expression.split()
    if len(fields) != len(CRON_FIELDS):
        raise ValueError(f"expected 5 fields ({' '.join(CRON_FIELDS)}), got {len(fields)}")
    normalized = " ".join(fields)
    try:
        croniter(normalized, datetime(2000, 1, 1, tzinfo=timezone.utc)).get_next(datetime)
    except (ValueError, KeyError) as exc:  # croniter's errors subclass ValueError
        raise ValueError(f"invalid cron expression {normalized!r}: {exc}") from None
    if fields[2] != "*" and fields[4] != "*":
        raise ValueError("restrict day_of_month or day_of_week, not both (cron and Celery combine them differently)")
    try:
        to_crontab(normalized)
    except ValueError as exc:
        raise ValueError(f"cron expression {normalized!r} is not supported by the scheduler: {exc}") from None
    return normalized


def to_crontab(expression: str) -> crontab:
    """The Celery crontab that fires ``expression`` (UTC)."""
    return crontab(**dict(zip(CRON_FIELDS, expression.split())))


def latest_slot(expression: str, now: datetime) -> datetime:
    """The latest time matching ``expression`` at or before ``now`` (UTC, whole minutes)."""
    minute = now.astimezone(timezone.utc).replace(second=0, microsecond=0)
    return croniter(expression, minute + timedelta(seconds=1)).get_prev(datetime).astimezone(timezone.utc)


def manual_slot(now: datetime) -> datetime:
    """The slot of a run triggered by hand: ``now`` to the second (a double click is one run)."""
    return now.astimezone(timezone.utc).replace(microsecond=0)


def slot_name(slot: datetime) -> str:
    """``20240501T120000Z``: a key-safe name that sorts in time order."""
    return slot.astimezone(timezone.utc).strftime(SLOT_NAME_FORMAT)
