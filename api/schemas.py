"""Response schemas of the HTTP API that are not the job model itself."""
from __future__ import annotations

from pydantic import BaseModel

from jobs.job import JobStatus


class ErrorBody(BaseModel):
    """The body of every error answer except 422: what went wrong, in words."""

    detail: str


class ResultPart(BaseModel):
    key: str
    uri: str
    rows: int
    shard: int | None = None  # None for rows carried over from an earlier run
    url: str  # presigned GET, short-lived


class ResultErrors(BaseModel):
    key: str
    uri: str
    count: int
    url: str


class JobResults(BaseModel):
    """``GET /v1/jobs/{id}/results``: the manifest, with presigned download URLs."""

    job_id: str
    status: str
    manifest_key: str
    manifest_uri: str
    dimensions: int | None
    columns: list[str]
    counts: dict[str, int]
    error: str | None = None
    output: dict | None = None  # dtype, dimensions and how to decode them
    usage: dict[str, int]
    parts: list[ResultPart]
    errors: ResultErrors
    url_expires_in_s: int


class JobList(BaseModel):
    """``GET /v1/jobs``: the caller's jobs, newest first; ``next_before`` pages further back."""

    jobs: list[JobStatus]
    next_before: str | None = None
