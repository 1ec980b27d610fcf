"""How many of a job's tokens are already computed and could be reused instead of run again.

The estimate asks a ``ReuseProbe`` about the content hashes of its sample (batched, one call per
estimate). Content-addressed reuse (``jobs/reuse/``) plugs its index in here: its probe looks the
hashes up under the job's tenant and reuse key (engine identity x output options) and answers
the tokens those outputs cost. Until then, and wherever reuse is off, nothing is reusable.
"""
from __future__ import annotations

from typing import Protocol, Sequence

from poolq.jobs.spec.job_spec import JobSpec


class ReuseProbe(Protocol):
    name: str  # says in the estimate where the answer came from

    def reusable(self, spec: JobSpec, tenant: str, content_hashes: Sequence[str]) -> list[bool]:
        """For each content hash, whether ``tenant`` already has this job's output for it."""
        ...


class NoReuseProbe:
    """Nothing is reusable: no reuse index is wired in (or reuse is off for the job)."""

    name = "none"

    def reusable(self, spec: JobSpec, tenant: str, content_hashes: Sequence[str]) -> list[bool]:
        return [False] * len(content_hashes)
