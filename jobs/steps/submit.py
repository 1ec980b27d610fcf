"""Accepting a job: validate against the server's models, persist the spec, enqueue planning."""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from poolq.engine import ModelSpecError, PolicyError, UnknownModelError, check_policy
from poolq.engine.loading.hub import HubModelRefused, ModelNameError
from poolq.engine.model_spec import PromptError, resolve_prompt
from poolq.jobs.context import JobContext
from poolq.jobs.coordination.tenant_day_usage import seconds_to_day_end
from poolq.jobs.inputs.input_uri import parse_input_uri
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.job_hooks import SubmissionRefused
from poolq.jobs.observability.job_events import job_submitted
from poolq.jobs.spec.job_ids import new_job_id
from poolq.jobs.spec.job_spec import InlineInput, JobLimits, JobSpec, UriInput
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import LOCAL_TENANT, JobStatus
from poolq.jobs.status.current_status import current_status
from poolq.jobs.steps.dispatch import dispatch_plan
from poolq.jobs.tasks import OptionRejected, job_task
from poolq.jobs.tenancy.input_access import InputNotAllowed, check_input_access
from poolq.storage import InvalidURIError, ObjectExistsError, dump_jsonl


class JobRejected(ValueError):
    """The spec is well-formed but this server cannot run it; ``field`` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ValidSpec:
    """A spec that passed ``validate_spec``, as a job records it (a Hub model pinned to the commit its
    revision names now), and the prompt resolved on the way (what the lane's budget counts)."""

    spec: JobSpec
    prompt: str  # put before every text: the literal one, the named one, the model's default, or ""


def validate_spec(ctx: JobContext, spec: JobSpec) -> ValidSpec:
    """Checks that need the server's state: known model, window within limits, input URI."""
    spec = spec.model_copy(update={"model": pinned_model(ctx, spec.model)})
    try:
        model_spec = ctx.registry.spec(spec.model)  # never loads or converts weights
    except UnknownModelError as exc:
        raise JobRejected("model", str(exc)) from None
    except ModelSpecError as exc:
        raise JobRejected("model", f"model {spec.model!r} cannot be loaded: {exc}") from None
    try:
        prompt = resolve_prompt(model_spec, spec.prompt_name, spec.prompt)
    except PromptError as exc:
        raise JobRejected("prompt_name", f"{exc} (model {spec.model!r})") from None
    task = job_task(spec)
    try:
        check_policy(model_spec, spec.long_documents.policy(), task.pooling_task_of(model_spec),
                     special_tokens=ctx.registry.special_tokens(spec.model) or 0)
        task.check(model_spec)
    except PolicyError as exc:
        raise JobRejected(f"long_documents.{exc.field}", str(exc)) from None
    except OptionRejected as exc:
        hint = f"; pick a model that does (known models: {', '.join(ctx.registry.names())})" if exc.field == "task" else ""
        raise JobRejected(exc.field, f"{exc}{hint}") from None
    _check_included_fields(spec, task.schema(model_spec, None).names)
    if isinstance(spec.input, InlineInput) and len(spec.input.documents) > ctx.settings.limits.max_inline_documents:
        raise JobRejected(
            "input.documents",
            f"{len(spec.input.documents)} inline documents; at most {ctx.settings.limits.max_inline_documents} "
            "are accepted inline (upload a JSONL file and pass its s3:// URI)",
        )
    if isinstance(spec.input, UriInput):
        try:
            target = parse_input_uri(spec.input.uri)
        except InvalidURIError as exc:
            raise JobRejected("input.uri", str(exc)) from None
        if target.scheme != "s3" and ctx.settings.storage.store == "s3":
            raise JobRejected("input.uri", "the server reads inputs from s3:// URIs only")
    _by_products(lambda: ctx.hooks.check_spec(spec, ctx.settings))  # the webhook's URL in the allow-list
    return ValidSpec(with_token_limit(spec, ctx.settings.limits.tenant_max_tokens_per_job), prompt)


def with_token_limit(spec: JobSpec, ceiling: int | None) -> JobSpec:
    """The spec with the operator's per-job token limit (``tenant_max_tokens_per_job``): its
    ``limits.max_tokens`` where it sets none, JobRejected where it sets more."""
    if ceiling is None:
        return spec
    if spec.limits is None:
        return spec.model_copy(update={"limits": JobLimits(max_tokens=ceiling)})
    if spec.limits.max_tokens > ceiling:
        raise JobRejected("limits.max_tokens", f"limits.max_tokens is {spec.limits.max_tokens}; this server allows at "
                                               f"most {ceiling} tokens per job")
    return spec


def pinned_model(ctx: JobContext, model: str) -> str:
    """``model`` as a job records it (``ModelRegistry.canonical``), or JobRejected on ``model`` naming why:
    not a name, unknown, not allowed on this server, or not loadable (pickled weights, custom code).
    A local directory is a model only where clients may name local files (in-process runs)."""
    try:
        return ctx.registry.canonical(model)
    except (ModelNameError, HubModelRefused, UnknownModelError) as exc:
        raise JobRejected("model", str(exc)) from None


def _by_products(check: Callable[[], None]) -> None:
    """Run a check of the products' hooks (``JobContext.hooks``); their refusal is a JobRejected."""
    try:
        check()
    except SubmissionRefused as exc:
        raise JobRejected(exc.field, str(exc)) from None


class IdempotencyConflict(ValueError):
    """The Idempotency-Key was used before with a different request body."""


class TooManyActiveJobs(RuntimeError):
    """The tenant already has its cap of unfinished jobs."""


class DailyTokensExhausted(TooManyActiveJobs):
    """The tenant's jobs ran ``tenant_max_tokens_per_day`` tokens today (UTC): no new job until
    ``retry_after_s`` from now, midnight UTC."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def check_day_tokens(ctx: JobContext, tenant: str) -> None:
    """DailyTokensExhausted once ``tenant``'s committed tokens today reach the operator's ceiling."""
    ceiling = ctx.settings.limits.tenant_max_tokens_per_day
    if ceiling is None:
        return
    now = datetime.now(timezone.utc)
    used = ctx.day_usage.total(tenant, now)
    if used >= ceiling:
        raise DailyTokensExhausted(f"tenant {tenant!r} ran {used} tokens today (UTC), its daily limit is {ceiling}; "
                                   "new jobs are accepted again at midnight UTC", seconds_to_day_end(now))


def submit_job(
    ctx: JobContext, spec: JobSpec, idempotency_key: str | None = None, *, tenant: str = LOCAL_TENANT
) -> JobStatus:
    """Persist ``tenant``'s job and queue it; returns its status (``queued`` when new).

    With ``idempotency_key`` the same key returns the same job, however often it is sent, even
    if an earlier submission died half-way (it is completed now). Keys are per tenant.
    """
    pinned = check_job(ctx, spec, tenant)
    body = spec.model_dump(mode="json")  # the request as sent: what an Idempotency-Key stands for
    job_id = new_job_id()
    if idempotency_key is not None:
        job_id = _claim_idempotency_key(ctx, f"{tenant}\n{idempotency_key}", body, job_id)
    job = JobHandle.of_tenant(ctx, job_id, tenant)
    if idempotency_key is not None:
        existing = current_status(job)
        # A queued job missing from the active list died before its marker: nothing would ever plan it.
        if existing is not None and (
            existing.status is not JobState.QUEUED or ctx.store.exists(ctx.service_layout.active(job_id))
        ):
            return existing
    check_day_tokens(ctx, tenant)
    _reserve_active_slot(job)
    return _persist_and_queue(job, pinned, pinned.model_dump(mode="json"))


def check_job(ctx: JobContext, spec: JobSpec, tenant: str = LOCAL_TENANT, *, budget: bool = True) -> JobSpec:
    """Every check of a submission before anything is written, JobRejected naming the field: the
    spec against this server (model, task, options, inline count), then what ``tenant`` may ask
    for (input URIs, document sizes, its own earlier run). ``submit_job`` and ``POST
    /v1/jobs/validate`` both run exactly this; the active-job cap comes after it in both
    (``check_active_cap`` to look, the reservation in ``submit_job`` to take a slot). ``budget=False``
    leaves out the estimate of ``limits.max_tokens`` (``POST /v1/jobs/estimate``, which is that estimate)."""
    spec = validate_spec(ctx, spec).spec
    check_submission(ctx, spec, tenant)
    if budget and spec.limits is not None:  # last: the estimate reads the input, which the checks above let it read
        _by_products(lambda: ctx.hooks.check_budget(ctx, spec, tenant))
    return spec


def check_active_cap(ctx: JobContext, tenant: str) -> None:
    """TooManyActiveJobs if ``tenant`` has its cap of unfinished jobs now (nothing is reserved), or
    DailyTokensExhausted if it has run its tokens of the day."""
    check_day_tokens(ctx, tenant)
    cap = ctx.settings.limits.max_active_jobs_per_tenant
    states = [ctx.status.field(job_id, "status") for job_id in ctx.status.active_ids(tenant)]
    unfinished = sum(1 for state in states if state is None or not JobState(state).is_terminal)
    if unfinished >= cap:
        raise TooManyActiveJobs(_at_cap(tenant, unfinished))


def _at_cap(tenant: str, active: int) -> str:
    return f"tenant {tenant!r} has {active} unfinished jobs, the most allowed; wait for one to finish or cancel one"


def check_submission(ctx: JobContext, spec: JobSpec, tenant: str) -> None:
    """What ``tenant`` may ask for: inputs it may read, documents within limits, its own earlier run."""
    if spec.incremental_from is not None and ctx.tenant_of(spec.incremental_from) != tenant:
        raise JobRejected("incremental_from", f"job {spec.incremental_from!r} not found")
    _by_products(lambda: ctx.hooks.check_submission(spec, tenant, ctx.settings))  # the sink it may load into
    if isinstance(spec.input, UriInput):
        try:
            check_input_access(spec.input.uri, tenant, ctx.settings)
        except (InvalidURIError, InputNotAllowed) as exc:
            raise JobRejected("input.uri", str(exc)) from None
    else:
        limit = ctx.settings.limits.max_document_chars
        for index, document in enumerate(spec.input.documents):
            if len(document.text) > limit:
                raise JobRejected(
                    f"input.documents.{index}.text",
                    f"document {document.id!r} has {len(document.text)} characters; at most {limit} are accepted",
                )


def _reserve_active_slot(job: JobHandle) -> None:
    """Count the job against ``max_active_jobs_per_tenant`` unfinished jobs, atomically (finished
    ones are pruned on the way); TooManyActiveJobs if the tenant is at its cap."""
    cap = job.ctx.settings.limits.max_active_jobs_per_tenant
    active = job.ctx.status.reserve_active(job.tenant, job.id, cap, time.time())
    if active is not None:
        raise TooManyActiveJobs(_at_cap(job.tenant, active))


def _claim_idempotency_key(ctx: JobContext, key: str, body: dict, job_id: str) -> str:
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


def _persist_and_queue(job: JobHandle, spec: JobSpec, body: dict) -> JobStatus:
    """Tenant index, input, spec (the ledger's first entry), active marker, status, then the plan task.

    Every write is create-if-absent or idempotent, so a retried submission completes a half-done one.
    """
    ctx, job_id, layout = job.ctx, job.id, job.layout
    ctx.register_job(job_id, job.tenant)
    created_at = datetime.now(timezone.utc)
    if isinstance(spec.input, InlineInput):
        rows = [document.as_row() for document in spec.input.documents]
        ctx.store.put_once(layout.inline_input, dump_jsonl(rows))
    ctx.store.put_once(layout.spec, json.dumps(body, indent=2, sort_keys=True).encode("utf-8"))
    ctx.store.put_once(ctx.service_layout.active(job_id), json.dumps({"created_at": created_at.isoformat()}).encode())
    status = JobStatus(
        id=job_id, tenant=job.tenant, status=JobState.QUEUED, model=spec.model, task=spec.task_label, created_at=created_at
    )
    created = ctx.status.create(status)
    existing = None if created else ctx.status.get(job_id)
    if created:
        _log_submitted(job, spec)
    dispatch_plan(job)
    return existing or status


def _log_submitted(job: JobHandle, spec: JobSpec) -> None:
    """The first line of the job's story (job_events.py): once, by the submission that created it."""
    if isinstance(spec.input, InlineInput):
        documents, source = len(spec.input.documents), "inline"
    else:
        documents, source = None, spec.input.uri
    job_submitted(job.id, job.tenant, model=spec.model, task=spec.task_label, documents=documents, source=source)


def _check_included_fields(spec: JobSpec, columns: list[str]) -> None:
    """Carried fields may not shadow an output column; inline ``fields`` may not shadow the document's own."""
    taken = sorted(set(spec.output.include_fields or ()) & set(columns))
    if taken:
        raise JobRejected("output.include_fields", f"{', '.join(taken)} would shadow output columns of the same name")
    if isinstance(spec.input, InlineInput):
        for index, document in enumerate(spec.input.documents):
            clash = sorted(set(document.fields or {}) & {"id", "text", "chunk_spans", "query", "query_id"})
            if clash:
                raise JobRejected(f"input.documents.{index}.fields", f"document {document.id!r}: fields may not be named "
                                                                     f"{', '.join(clash)}")


