"""Finalizing: when the ledger says nothing more will be committed, write the error file, then
the manifest (conditionally, last), bring the cached status in line, and clean up."""
from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa

from poolq.engine import ModelSpecError, UnknownModelError
from poolq.engine.model_spec import ModelKind, ModelSpec
from poolq.jobs.context import JobContext
from poolq.jobs.coordination.status_store import UnitCounts
from poolq.jobs.coordination.work_units import FINALIZE_UNIT, PLAN_UNIT, shard_unit
from poolq.jobs.inputs.included_fields import IncludedColumns
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.engine_claim import job_engine
from poolq.jobs.ledger.job_ledger import Plan, ShardCommit
from poolq.jobs.ledger.manifest import (
    JobManifest,
    ManifestColumn,
    ManifestCounts,
    ManifestErrors,
    ManifestPart,
    ManifestShards,
    ManifestTimings,
    ManifestUsage,
    OutputEncoding,
    pending_sinks,
)
from poolq.jobs.observability.job_events import job_finished
from poolq.jobs.spec.job_spec import InlineInput, JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobStatus
from poolq.jobs.spec.reuse_counts import ReuseCounts
from poolq.jobs.spec.sink_config import sink_outcomes_json
from poolq.jobs.status.current_status import job_errors, usage_tokens
from poolq.jobs.steps.cleanup import clean_finished_job
from poolq.jobs.steps.dispatch import ready_to_finalize
from poolq.jobs.steps.job_report import job_report
from poolq.jobs.steps.shards.budget import budget_error, stopped_by_budget, token_limit
from poolq.jobs.tasks import job_task
from poolq.storage import read_part_schema, type_name


def finalize_job(job: JobHandle) -> JobState | None:
    """Finish ``job.id`` if it is ready; returns its final state, or None if it is not ready."""
    ctx = job.ctx
    ledger = job.ledger
    manifest = ledger.manifest()
    if manifest is None:
        lease = ctx.leases.acquire(job.id, FINALIZE_UNIT, ctx.settings.reliability.lease_ttl_s)
        if lease is None:
            return None  # another finalizer holds it
        try:
            manifest = ledger.manifest()
            if manifest is None:
                if not ready_to_finalize(ledger, ctx.leases):
                    return None
                _write_manifest(job, _build_manifest(job))
                manifest = ledger.manifest()
        finally:
            ctx.leases.release(lease)
    return _conclude(job, manifest)


def finalize_failed(job: JobHandle, error: str) -> JobState:
    """The job cannot go on (its input is unreadable, ...): write a failed manifest with ``error``."""
    _write_manifest(job, _build_manifest(job, failure=error))
    return _conclude(job, job.ledger.manifest())


def _write_manifest(job: JobHandle, manifest: JobManifest) -> None:
    """Write the manifest unless one exists; the writer that wins counts the job as finished."""
    if job.ledger.write_manifest(manifest):
        job.ctx.metrics.job_finished(manifest.status.value)
        job_finished(job.id, job.tenant, manifest)


def _conclude(job: JobHandle, manifest: JobManifest | None) -> JobState:
    if manifest is None:  # written a moment ago: only a store that loses objects gets here
        raise RuntimeError(f"job {job.id}: the manifest just written cannot be read back")
    conclude_job(job, manifest)
    return manifest.status


def conclude_job(job: JobHandle, manifest: JobManifest) -> None:
    """What follows a manifest, each part idempotent: the status says it, the sink loads and the end
    event are queued, and the job's run-time state is cleaned up. The finalizer runs it, and the
    reconciler again for a job still active after its manifest (a finalizer that died or failed)."""
    sync_status(job, manifest)
    # After the end is durable (manifest, status). If a task cannot be sent (the broker is down) it
    # raises before the clean-up: the job stays active for the retry or the reconciler.
    job.ctx.hooks.job_ended(job, manifest)  # the products': sink loads (their own step: a sink never holds
    # the job back), then the end event
    clean_finished_job(job, manifest)


def sync_status(job: JobHandle, manifest: JobManifest) -> None:
    """Make the cached status say what the manifest says (counts, state, result)."""
    ctx = job.ctx
    counts = manifest.counts
    # Keep the committed units marked as counted: a shard task redelivered later must not add them again.
    units = [PLAN_UNIT, *(shard_unit(shard) for shard in job.ledger.committed_shards())]
    reuse = manifest.reuse or ReuseCounts()
    totals = UnitCounts(completed=counts.completed, failed=counts.failed, tokens=manifest.usage.tokens,
                        not_processed=counts.not_processed, reused_documents=reuse.reused_documents,
                        reused_tokens=reuse.reused_tokens)
    ctx.status.set_counts(job.id, units, totals, errors=manifest.errors.summary)
    ctx.status.update(job.id, total=counts.total, manifest_uri=ctx.store.uri(job.layout.manifest))
    if manifest.reuse is not None:
        ctx.status.update(job.id, reuse=manifest.reuse.model_dump_json())
    # The sink loads' first states; later ones are written by the loads themselves (sink_entries.py),
    # which a repeated sync from an older read of the manifest must not undo.
    if manifest.sinks and ctx.status.field(job.id, "sinks") is None:
        ctx.status.update(job.id, sinks=sink_outcomes_json(manifest.sinks))
    ctx.status.remove_active(job.tenant, job.id)
    extra = {"error": manifest.error} if manifest.error else {}
    ctx.status.advance_to(job.id, manifest.status, finished_at=manifest.finished_at, **extra)


def _build_manifest(job: JobHandle, failure: str | None = None) -> JobManifest:
    ctx, ledger, layout = job.ctx, job.ledger, job.layout
    spec = job.spec  # ObjectNotFoundError if the job has none (a store that lost it)
    stored_plan = ledger.plan()  # None: planning never finished (a job failed while planning)
    plan = stored_plan or Plan(total=_known_total(spec), plan_errors=0)
    commits = ledger.commits()
    cancelled = ledger.cancel_requested()
    error_count = _write_errors(ctx, layout.plan_errors if stored_plan else None, commits, layout.errors)
    documents = sum(commit.documents for commit in commits.values()) + plan.carried_records
    failed = error_count - sum(commit.not_processed for commit in commits.values())  # error lines, less the unrun
    state = JobState.FAILED if failure else JobState.CANCELLED if cancelled else _final_state(documents, failed)
    # A cancel or a failure may leave records unrun (in no part and no error line): counted, so the counts add up
    stopped = cancelled or failure is not None
    not_processed = max(0, plan.total - documents - failed) if stopped else 0
    errors = job_errors(stored_plan, commits)
    if state is JobState.FAILED and failure is None and failed:  # every record failed: say why
        failure = f"every record failed: {errors.describe()}"
    status = ctx.status.get(job.id)
    parts = [ManifestPart(key=part.key, uri=ctx.store.uri(part.key), rows=part.rows) for part in plan.carried]
    parts += [
        ManifestPart(key=commit.part_key, uri=ctx.store.uri(commit.part_key), rows=commit.rows, shard=shard)
        for shard, commit in sorted(commits.items())
        if commit.part_key
    ]
    dimensions = max([c.dimensions for c in commits.values() if c.dimensions]
                     + [part.dimensions for part in plan.carried if part.dimensions], default=None)
    finished_at = datetime.now(timezone.utc)
    model_spec = _declared_spec(ctx, spec.model)
    # The parts' own schema where there are parts (the truth a reader gets); else what they would hold.
    schema = read_part_schema(ctx.store, parts[0].key) if parts else _unwritten_schema(spec, plan, model_spec, dimensions)
    manifest = JobManifest(
        job_id=job.id,
        status=state,
        model=spec.model,
        task=spec.task_label,
        options=spec.model_dump(mode="json", exclude={"input"}),
        engines=_engines(plan, commits),
        engine=job_engine(ledger, commits, spec.allow_mixed_engines),
        columns=schema.names,
        dimensions=dimensions,
        output=_output_block(spec, dimensions, schema, model_spec),
        counts=ManifestCounts(
            total=plan.total, completed=documents, failed=failed, not_processed=not_processed,
            carried=plan.carried_records, rows=sum(part.rows for part in parts),
            superseded=plan.superseded if spec.supersedes else None,
        ),
        shards=ManifestShards(total=plan.num_shards, committed=len(commits),
                              gave_up=sum(c.gave_up for c in commits.values()),
                              not_started=sorted(set(range(plan.num_shards)) - set(commits)) if stopped else None),
        usage=ManifestUsage(tokens=usage_tokens(commits)),
        parts=parts,
        errors=ManifestErrors(key=layout.errors, uri=ctx.store.uri(layout.errors), count=error_count,
                              by_code=errors.codes, samples=list(errors.samples)),
        created_at=status.created_at if status else None,
        started_at=status.started_at if status else None,
        finished_at=finished_at,
        timings=_timings(status, finished_at),
        error=failure or _budget_error(job, cancelled, commits, not_processed),
        reuse=ReuseCounts.of(commits.values()),
        sinks=pending_sinks(spec.sink, state),
    )
    manifest.report = job_report(job, stored_plan, commits, manifest)
    return manifest


def _budget_error(job: JobHandle, cancelled: bool, commits: dict[int, ShardCommit], not_processed: int) -> str | None:
    """A job its token budget stopped ends ``cancelled`` with an error saying so (status and end event)."""
    if not cancelled or not stopped_by_budget(job):
        return None
    return budget_error(token_limit(job), usage_tokens(commits), not_processed)


def _known_total(spec: JobSpec) -> int:
    """Records of an input never planned: inline ones are in the spec; a URI's were never read (0)."""
    return len(spec.input.documents) if isinstance(spec.input, InlineInput) else 0


def _engines(plan: Plan, commits: dict) -> list[str]:
    """The engine identities that made the output's vectors (one, unless workers differed)."""
    made = {commit.engine for commit in commits.values() if commit.rows and commit.engine}
    if plan.carried_records and plan.engine:
        made.add(plan.engine)
    return sorted(made)


def _unwritten_schema(spec: JobSpec, plan: Plan, model_spec: ModelSpec | None, dimensions: int | None) -> pa.Schema:
    """The columns parts would have had, for a job that wrote none: the task's, then the carried
    fields with the types planning gave them (none for a model this worker cannot read)."""
    if model_spec is None:
        return pa.schema([])
    schema = job_task(spec).schema(model_spec, dimensions)
    for name, data_type in IncludedColumns(spec.output.include_fields, plan.field_types).arrow_types().items():
        schema = schema.append(pa.field(name, data_type, nullable=True))
    return schema


def _declared_spec(ctx: JobContext, model: str) -> ModelSpec | None:
    """What the model declares; None where this worker cannot read it (a model missing from its
    registry): the manifest of a job that failed for that reason must still be written."""
    try:
        return ctx.registry.spec(model)
    except (UnknownModelError, ModelSpecError):
        return None


def _sparse_aggregation(spec: JobSpec, model_spec: ModelSpec | None) -> str | None:
    """How a sparse job's model reduced token weights over positions (its SPLADE pooling; BGE-M3: max)."""
    tasks = spec.task if isinstance(spec.task, list) else [spec.task]
    if "sparse_embed" not in tasks or model_spec is None:
        return None
    return "max" if model_spec.kind is ModelKind.M3_ENCODER else model_spec.sparse_reduce


def _output_block(spec: JobSpec, dimensions: int | None, schema: pa.Schema,
                  model_spec: ModelSpec | None) -> OutputEncoding:
    """The parts' schema, and how ``embedding`` is stored: dtype, the vectors' dimensions, and what
    decoding needs (int8: ``x = (q - zero_point) * scale``); a classifier's label names in score
    order. ``dimensions`` is the requested one when no row was written.

    A job passed ``validate_spec``, so int8 without ``int8_range`` means a normalized model: [-1, 1].
    """
    codec = spec.output.codec(normalized=True)
    columns = [ManifestColumn(name=column.name, type=type_name(column.type), nullable=column.nullable) for column in schema]
    return OutputEncoding(format=spec.output.format, dimensions=dimensions or spec.output.dimensions,
                          schema_=columns, sparse_aggregation=_sparse_aggregation(spec, model_spec),
                          labels=list(model_spec.labels) if model_spec and model_spec.labels else None,
                          **codec.manifest_info())


def _timings(status: JobStatus | None, finished_at: datetime) -> ManifestTimings:
    started = status.started_at if status else None
    if status is None or started is None:
        return ManifestTimings()
    return ManifestTimings(queued_s=(started - status.created_at).total_seconds(),
                           running_s=(finished_at - started).total_seconds())


def _write_errors(ctx: JobContext, plan_errors_key: str | None, commits: dict[int, ShardCommit], target: str) -> int:
    """Concatenate planning's and each committed shard's error lines into ``target``."""
    keys = ([plan_errors_key] if plan_errors_key else []) + [commit.errors_key for _, commit in sorted(commits.items())]
    count = 0

    def lines():  # streamed: the error file is never held whole, whatever its size
        nonlocal count
        for key in keys:
            with ctx.store.open(key) as stream:
                for raw in stream:
                    if raw.strip():
                        count += 1
                        yield raw if raw.endswith(b"\n") else raw + b"\n"

    ctx.store.put_chunks(target, lines())
    return count


def _final_state(documents: int, errors: int) -> JobState:
    if errors == 0:
        return JobState.SUCCEEDED
    return JobState.PARTIALLY_SUCCEEDED if documents else JobState.FAILED
