"""A tenant's jobs, newest first, straight from the ledger (job ids sort by creation time)."""
from __future__ import annotations

from poolq.jobs.context import JobContext
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_ids import is_job_id
from poolq.jobs.spec.job_status import JobStatus
from poolq.jobs.status.current_status import current_status


def list_jobs(ctx: JobContext, tenant: str, *, limit: int = 50, before: str | None = None) -> list[JobStatus]:
    """Up to ``limit`` of ``tenant``'s jobs created before job ``before`` (if given), newest first."""
    names = ctx.store.list_prefixes(ctx.service_layout.tenant_jobs(tenant) + "/")
    ids = sorted((name for name in names if is_job_id(name) and (before is None or name < before)), reverse=True)
    statuses = []
    for job_id in ids:
        status = current_status(JobHandle.of_tenant(ctx, job_id, tenant), place=False)  # a place per poll, not per row
        if status is not None and status.tenant == tenant:
            statuses.append(status)
        if len(statuses) >= limit:
            break
    return statuses
