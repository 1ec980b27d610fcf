"""What the products built on the job core (``poolq.products``: sinks, webhooks) add to its steps,
without the core importing them: checks on a spec and on a tenant's submission, and what follows a
job's end. The edges build their context with the products' hooks (``poolq.products.job_hooks.ProductHooks``);
the core calls them at the same points of submit and finalize where it once called the products."""
from __future__ import annotations

from typing import Any, Protocol

from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec


class SubmissionRefused(ValueError):
    """A product refuses a field of the spec; submit answers it as JobRejected(field, message)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class JobHooks(Protocol):
    def check_spec(self, spec: JobSpec, settings: Settings) -> None:
        """SubmissionRefused for what the spec alone may not ask for (validate and submit)."""

    def check_submission(self, spec: JobSpec, tenant: str, settings: Settings) -> None:
        """SubmissionRefused for what ``tenant`` may not ask for."""

    def check_budget(self, ctx: Any, spec: JobSpec, tenant: str) -> None:
        """SubmissionRefused on ``limits.max_tokens`` when the job would run more tokens (the estimate's).
        ``ctx`` is the JobContext (typed Any: jobs/context.py stands above these hooks)."""

    def job_planned(self, job: Any) -> None:
        """The job is planned and its shards are out: its place in fair share is known (the webhook's
        ``job.running``); idempotent (a redelivered plan task calls it again); never raises."""

    def job_ended(self, job: Any, manifest: JobManifest) -> None:
        """Queue what follows the end the manifest records; idempotent (the reconciler may call it
        again). ``job`` is the job's JobHandle: typed Any because jobs/job_handle.py stands above
        the context that carries these hooks."""


class NoProducts:
    """The job core alone: nothing checked beyond the core's own rules, nothing follows a job's end.
    A context built by hand in a test of the core; every edge passes the products' hooks."""

    def check_spec(self, spec: JobSpec, settings: Settings) -> None:
        return None

    def check_submission(self, spec: JobSpec, tenant: str, settings: Settings) -> None:
        return None

    def check_budget(self, ctx: Any, spec: JobSpec, tenant: str) -> None:
        return None  # the running job still stops at its limit (jobs/steps/shards/budget.py)

    def job_planned(self, job: Any) -> None:
        return None

    def job_ended(self, job: Any, manifest: JobManifest) -> None:
        return None
