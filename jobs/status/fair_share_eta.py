"""When each unfinished job would end if the fleet were shared the way fair share shares it
(``jobs/coordination/fair_share.py``), in the fluid limit: the tenants with work split the fleet's
tokens/s equally, and a tenant's jobs split its part equally; when one job ends, the others' parts
grow. So a job's time left counts the work of the jobs it shares the fleet with as much as its own
(a job's own past pace cannot see a tenant that is about to finish and free half the fleet).

Pure arithmetic over a snapshot; O(jobs²), for the few dozen jobs a fleet has unfinished.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Backlog:
    """A job's tokens still to run."""

    job_id: str
    tenant: str
    tokens: float


def shares(tenants_of_jobs: dict[str, str]) -> dict[str, float]:
    """Each job's part of the fleet (job -> tenant in; job -> fraction out): equal per tenant, then
    equal per job within its tenant."""
    per_tenant = Counter(tenants_of_jobs.values())
    return {job: 1.0 / len(per_tenant) / per_tenant[tenant] for job, tenant in tenants_of_jobs.items()}


def finish_times(backlogs: Iterable[Backlog], tokens_per_s: float) -> dict[str, float]:
    """Seconds from now until each job ends, the fleet running ``tokens_per_s`` in all."""
    if tokens_per_s <= 0:
        raise ValueError(f"tokens_per_s must be positive, got {tokens_per_s}")
    jobs = list(backlogs)
    ends = {job.job_id: 0.0 for job in jobs if job.tokens <= 0}
    left = {job.job_id: float(job.tokens) for job in jobs if job.tokens > 0}
    tenants = {job.job_id: job.tenant for job in jobs if job.tokens > 0}
    now = 0.0
    while left:
        rate = {job: part * tokens_per_s for job, part in shares(tenants).items()}
        step = min(left[job] / rate[job] for job in left)
        now += step
        for job in list(left):
            left[job] -= rate[job] * step
            if left[job] <= rate[job] * step * 1e-9:  # ends in this step (float rounding aside)
                ends[job] = now
                del left[job], tenants[job]
    return ends
