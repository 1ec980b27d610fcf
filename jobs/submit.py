"""Accepting a job: validate against the server's models, persist the spec, enqueue planning."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

from engine import ModelSpecError, PolicyError, UnknownModelError, check_policy, read_model_spec
from storage import InvalidURIError, dump_jsonl, parse_uri

from .context import JobContext, write_json
from .job import InlineInput, JobSpec, JobState, JobStatus, UriInput


class JobRejected(ValueError):
    """The spec is well-formed but this server cannot run it; ``field`` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def validate_spec(spec: JobSpec, ctx: JobContext) -> None:
    """Checks that need the server's state: known model, window within limits, input URI."""
    try:
        model_spec = read_model_spec(ctx.registry.resolve(spec.model))
    except UnknownModelError as exc:
        raise JobRejected("model", str(exc)) from None
    except ModelSpecError as exc:
        raise JobRejected("model", f"model {spec.model!r} cannot be loaded: {exc}") from None
    try:
        check_policy(model_spec, spec.long_documents.policy())
    except PolicyError as exc:
        raise JobRejected(f"long_documents.{exc.field}", str(exc)) from None
    if isinstance(spec.input, InlineInput) and len(spec.input.documents) > ctx.settings.max_inline_documents:
        raise JobRejected(
            "input.documents",
            f"{len(spec.input.documents)} inline documents; at most {ctx.settings.max_inline_documents} "
            "are accepted inline (upload a JSONL file and pass its s3:// URI)",
        )
    if isinstance(spec.input, UriInput):
        try:
            target = parse_uri(spec.input.uri)
        except InvalidURIError as exc:
            raise JobRejected("input.uri", str(exc)) from None
        if target.scheme != "s3" and ctx.settings.store == "s3":
            raise JobRejected("input.uri", "the server reads inputs from s3:// URIs only")


def submit_job(spec: JobSpec, ctx: JobContext) -> JobStatus:
    """Persist the job and queue it; returns its first status (``queued``)."""
    validate_spec(spec, ctx)
    job_id = uuid.uuid4().hex
    layout = ctx.layout(job_id)
    if isinstance(spec.input, InlineInput):
        rows = [document.model_dump(exclude_none=True) for document in spec.input.documents]
        ctx.store.put(layout.inline_input, dump_jsonl(rows), if_absent=True)
    write_json(ctx.store, layout.spec, spec.model_dump(mode="json"), if_absent=True)
    status = JobStatus(
        id=job_id, status=JobState.QUEUED, model=spec.model, task=spec.task, created_at=datetime.now(timezone.utc)
    )
    ctx.status.create(status)
    ctx.enqueuer.plan(job_id)
    return status
