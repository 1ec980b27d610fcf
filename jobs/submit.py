"""Accepting a job: validate against the server's models, persist the spec, enqueue planning."""
from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime, timezone

from engine import ModelSpecError, PolicyError, UnknownModelError, check_policy, read_model_spec
from storage import InvalidURIError, ObjectExistsError, dump_jsonl

from .context import JobContext
from .dispatch import dispatch_plan
from .inputs import parse_input_uri
from .job import InlineInput, JobSpec, JobState, JobStatus, UriInput
from .recovery import recover_status


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
            target = parse_input_uri(spec.input.uri)
        except InvalidURIError as exc:
            raise JobRejected("input.uri", str(exc)) from None
        if target.scheme != "s3" and ctx.settings.store == "s3":
            raise JobRejected("input.uri", "the server reads inputs from s3:// URIs only")


class IdempotencyConflict(ValueError):
    """The Idempotency-Key was used before with a different request body."""


def submit_job(spec: JobSpec, ctx: JobContext, idempotency_key: str | None = None) -> JobStatus:
    """Persist the job and queue it; returns its status (``queued`` when new).

    With ``idempotency_key`` the same key returns the same job, however often it is sent, even
    if an earlier submission died half-way (it is completed now).
    """
    validate_spec(spec, ctx)
    body = spec.model_dump(mode="json")
    job_id = uuid.uuid4().hex
    if idempotency_key is not None:
        job_id = _claim_idempotency_key(idempotency_key, body, job_id, ctx)
        existing = ctx.status.get(job_id) or recover_status(job_id, ctx)
        # A queued job missing from the active list died before its marker: nothing would ever plan it.
        if existing is not None and (
            existing.status is not JobState.QUEUED or ctx.store.exists(ctx.service_layout.active(job_id))
        ):
            return existing
    return _persist_and_queue(job_id, spec, body, ctx)


def _claim_idempotency_key(key: str, body: dict, job_id: str, ctx: JobContext) -> str:
    """The job id the key stands for: ours if this is its first use, else the first one's."""
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    request_hash = hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()
    marker = ctx.service_layout.idempotency(digest)
    claim = {"job_id": job_id, "request_sha256": request_hash}
    try:
        ctx.store.put(marker, json.dumps(claim).encode("utf-8"), if_absent=True)
        return job_id
    except ObjectExistsError:
        earlier = json.loads(ctx.store.get(marker))
    if earlier["request_sha256"] != request_hash:
        raise IdempotencyConflict("this Idempotency-Key was already used with a different request body")
    return earlier["job_id"]


def _persist_and_queue(job_id: str, spec: JobSpec, body: dict, ctx: JobContext) -> JobStatus:
    """Input, spec (the ledger's first entry), active marker, status, then the plan task.

    Every write is create-if-absent or idempotent, so a retried submission completes a half-done one.
    """
    layout = ctx.layout(job_id)
    created_at = datetime.now(timezone.utc)
    if isinstance(spec.input, InlineInput):
        rows = [document.model_dump(exclude_none=True) for document in spec.input.documents]
        _put_once(ctx, layout.inline_input, dump_jsonl(rows))
    _put_once(ctx, layout.spec, json.dumps(body, indent=2, sort_keys=True).encode("utf-8"))
    _put_once(ctx, ctx.service_layout.active(job_id), json.dumps({"created_at": created_at.isoformat()}).encode())
    status = JobStatus(id=job_id, status=JobState.QUEUED, model=spec.model, task=spec.task, created_at=created_at)
    created = ctx.status.create(status)
    existing = None if created else ctx.status.get(job_id)
    dispatch_plan(job_id, ctx)
    return existing or status


def _put_once(ctx: JobContext, key: str, data: bytes) -> None:
    try:
        ctx.store.put(key, data, if_absent=True)
    except ObjectExistsError:
        pass
