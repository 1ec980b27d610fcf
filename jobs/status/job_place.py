"""Where a queued or running job stands (``JobStatus.queue``, docs/http-api.md#place): the jobs of
its tenant ahead of it, its tenant's share of the fleet, the fleet's tokens/s for its model, and
the time left with the fleet shared as fair share shares it (``fair_share_eta.py``).

Status polls are frequent, so this reads only the status cache (the unfinished jobs' cached
statuses, the live workers and their measured rates), never the bucket.

Fair share runs a tenant's jobs side by side, not one after another, so "ahead" is about order
only: the tenant's unfinished jobs submitted before this one. The ETA counts every unfinished
job's work as fair share will run it, those submitted later included (they take their part too).
A job not planned yet has no token count, yet it will take its part of the fleet: leaving it out
made the ETAs of the jobs planned before it ~45 % short (another tenant's job submitted at the same
moment, planned 3.5 s later: docs/benchmarks.md#eta-accuracy). So while any job in line is not
planned, no job has an ETA (None: unknown, not a made-up number); planning takes seconds.
Unmeasured jobs count at the prior of their model (``token_prior.py``).
"""
from __future__ import annotations

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.worker_throughput import fleet_tokens_per_s
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobPlace, JobStatus
from poolq.jobs.status.fair_share_eta import Backlog, finish_times
from poolq.jobs.status.token_prior import priced

IN_LINE = frozenset({JobState.QUEUED, JobState.RUNNING})  # states that take (or will take) fair share's slots


def tokens_left(status: JobStatus) -> int | None:
    """The job's estimated tokens not yet run (committed or in progress); None before it is planned."""
    if status.estimate.tokens is None:
        return None
    return max(0, status.estimate.tokens - status.usage.tokens - status.in_progress.tokens)


def job_place(ctx: JobContext, status: JobStatus) -> JobPlace | None:
    """``status``'s place, or None unless it is queued or running."""
    if status.status not in IN_LINE:
        return None
    others = [other for other in (ctx.status.get(job_id) for job_id in ctx.status.all_active_ids() if job_id != status.id)
              if other is not None and other.status in IN_LINE]
    in_line = priced(ctx, [*others, status])
    ahead = sum(1 for other in others if other.tenant == status.tenant and _order(other) < _order(status))
    # Tenants with work: planned work left, or a job still to plan (it joins in a moment); its own always.
    with_work = {job.tenant for job in in_line if tokens_left(job) != 0} | {status.tenant}
    fleet = fleet_tokens_per_s(ctx.throughput.rates(status.model), ctx.workers.live_names())
    return JobPlace(jobs_ahead=ahead, tenant_share=1.0 / len(with_work),
                    fleet_tokens_per_s=None if fleet is None else round(fleet, 1), eta_s=_eta(in_line, status.id, fleet))


def _eta(in_line: list[JobStatus], job_id: str, fleet: float | None) -> float | None:
    """``job_id``'s time left, None while the fleet's rate or any job's tokens in line are unknown."""
    backlogs = [Backlog(job.id, job.tenant, left) for job in in_line if (left := tokens_left(job)) is not None]
    if fleet is None or len(backlogs) < len(in_line):
        return None
    return round(finish_times(backlogs, fleet)[job_id], 1)


def _order(status: JobStatus) -> tuple:
    """Submission order: creation time, then id (ids sort by creation time too)."""
    return status.created_at, status.id
