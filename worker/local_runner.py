"""The embedded default: run a whole job in this process, no Redis, no S3, no worker."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from poolq.jobs.context import JobContext, build_context
from poolq.jobs.coordination.enqueuer import InlineEnqueuer
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_ledger import SectionStage
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_status import JobStatus
from poolq.jobs.steps.failures import fail_job, fail_shard
from poolq.jobs.steps.finalizer import finalize_job
from poolq.jobs.steps.plan_section import plan_section
from poolq.jobs.steps.planner import plan_job
from poolq.jobs.steps.shards.shard_runner import run_shard
from poolq.jobs.steps.submit import submit_job
from poolq.products.batches.batch_advance import advance_batch
from poolq.products.job_hooks import ProductHooks
from poolq.products.sinks.sink_load import fail_sinks, load_sinks


def local_context(out_dir: Path, settings: Settings | None = None) -> JobContext:
    """A context whose store is ``out_dir`` and whose steps run inline, in order."""
    base = settings or Settings()
    settings = base.with_values(store="local", local_store_root=out_dir, output_prefix="", allow_file_inputs=True)
    enqueuer = InlineEnqueuer()
    ctx = build_context(settings, enqueuer, hooks=ProductHooks())
    enqueuer.bind(
        plan=lambda job_id: _run_bound(ctx, job_id, plan_job, fail_job),
        plan_section=lambda job_id, stage, section: _run_bound(
            ctx, job_id, lambda job: plan_section(job, SectionStage(stage), section), fail_job),
        run_shard=lambda job_id, shard: _run_bound(
            ctx, job_id, lambda job: run_shard(job, shard), lambda job, exc: fail_shard(job, shard, exc)),
        finalize=lambda job_id: _run_bound(ctx, job_id, finalize_job, fail_job),
        # A batch step that fails leaves the batch where it was: the next call takes it on from there.
        advance_batch=lambda tenant, batch_id: advance_batch(ctx, tenant, batch_id),
        load_sinks=lambda job_id: _run_bound(ctx, job_id, load_sinks, fail_sinks),
    )
    return ctx


def _run_bound(ctx: JobContext, job_id: str, step: Callable[[JobHandle], object],
               give_up: Callable[[JobHandle, Exception], None]) -> None:
    """Bind the job once and run its step; in process there is nobody to retry, so an error
    fails the step for good, with its message."""
    job = JobHandle.bind(ctx, job_id)
    try:
        step(job)
    except Exception as exc:  # noqa: BLE001 - recorded on the job, which is what the caller reads
        give_up(job, exc)


def run_job_locally(ctx: JobContext, spec: JobSpec) -> JobStatus:
    """Submit and run ``spec`` to completion; returns its final status."""
    job = submit_job(ctx, spec)
    status = ctx.status.get(job.id)
    if status is None:  # pragma: no cover - the in-memory store cannot lose a job it just created
        raise RuntimeError(f"job {job.id} vanished")
    return status
