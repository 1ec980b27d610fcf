"""Response schemas of the HTTP API that are not the job model itself."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from poolq.jobs import (
    JobManifest,
    JobStatus,
    ManifestCounts,
    ManifestErrors,
    ManifestPart,
    ManifestSink,
    ManifestUsage,
    OutputEncoding,
)
from poolq.jobs.report.data_report import DataReport
from poolq.jobs.spec.dict_access import DictAccessDeprecated
from poolq.storage import ObjectStore

# A route's ``responses=`` (its other answers in the OpenAPI document): status code -> what FastAPI takes.
OpenApiResponses = dict[int | str, dict[str, Any]]


class ErrorBody(BaseModel):
    """The body of every error answer except 422 on poolq's own routes: what went wrong, in words."""

    detail: str


class OpenAIError(BaseModel):
    """What went wrong, as OpenAI's API says it: ``param`` is the offending field's dotted path
    (``model``, ``input.3``) where one is to blame, ``code`` its kind (``rate_limit_exceeded``)."""

    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorBody(BaseModel):
    """The body of every error answer on OpenAI's routes (``/v1/files``, ``/v1/batches``,
    ``/v1/embeddings``, ``/v1/models``): OpenAI's clients raise it as their own errors."""

    error: OpenAIError


class ResultPart(ManifestPart):
    url: str  # presigned GET, short-lived


class ResultErrors(ManifestErrors):
    url: str  # presigned GET, short-lived


class JobResults(DictAccessDeprecated, BaseModel):
    """``GET /v1/jobs/{id}/results``: the manifest's outcome, with presigned download URLs."""

    job_id: str
    status: str
    manifest_key: str
    manifest_uri: str
    dimensions: int | None
    columns: list[str]
    counts: ManifestCounts
    error: str | None = None
    output: OutputEncoding | None = None  # dtype, dimensions and how to decode them
    usage: ManifestUsage
    parts: list[ResultPart]
    errors: ResultErrors
    url_expires_in_s: int
    manifest: dict  # the stored manifest itself (no URLs): what `poolq results` writes as manifest.json
    sinks: list[ManifestSink] | None = None  # the job names a sink: its load's state and counts (docs/sinks/)
    report: DataReport | None = None  # the data report (absent for jobs finished before reports)

    @classmethod
    def from_manifest(cls, manifest: JobManifest, manifest_key: str, store: ObjectStore, expires_s: int) -> "JobResults":
        """The answer for ``manifest`` (stored at ``manifest_key``), its URLs signed for ``expires_s``."""
        def sign(key: str) -> str:
            return store.presigned_get_url(key, expires_s)

        return cls(
            job_id=manifest.job_id, status=manifest.status.value, manifest_key=manifest_key,
            manifest_uri=store.uri(manifest_key), dimensions=manifest.dimensions, columns=manifest.columns,
            counts=manifest.counts, error=manifest.error, usage=manifest.usage, output=manifest.output,
            parts=[ResultPart(**part.model_dump(), url=sign(part.key)) for part in manifest.parts],
            errors=ResultErrors(**manifest.errors.model_dump(), url=sign(manifest.errors.key)),
            url_expires_in_s=expires_s, manifest=manifest.model_dump(mode="json"),
            sinks=manifest.sinks, report=manifest.report,
        )


class SpecValidation(DictAccessDeprecated, BaseModel):
    """``POST /v1/jobs/validate``: the body would be accepted (else the answer is a 422)."""

    valid: bool


class JobList(DictAccessDeprecated, BaseModel):
    """``GET /v1/jobs``: the caller's jobs, newest first; ``next_before`` pages further back."""

    jobs: list[JobStatus]
    next_before: str | None = None
