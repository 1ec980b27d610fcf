"""The products' hooks into the job core (``poolq.jobs.job_hooks``): a job's sink, webhook and token
budget (against its estimate) are checked at submission, and a job's end queues its sink loads, then
its end event. Every edge (the API, the Celery worker, the in-process runner) builds its context with
``ProductHooks()``."""
from __future__ import annotations

from poolq.jobs.context import JobContext
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.job_hooks import SubmissionRefused
from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.products.estimate.token_budget import check_token_budget
from poolq.products.sinks.sink_access import SinkNotAllowed, check_sink_access
from poolq.products.sinks.sink_entries import send_pending_loads
from poolq.products.webhooks.allow_list import AllowList
from poolq.products.webhooks.events import announce_job_end
from poolq.products.webhooks.running_event import announce_job_running
from poolq.products.webhooks.webhook_url import WebhookRefused


class ProductHooks:
    """``JobHooks`` as the products fill them."""

    def check_spec(self, spec: JobSpec, settings: Settings) -> None:
        """The webhook's URL is in the operator's allow-list (its host's addresses are checked at
        delivery, each time: a name may resolve elsewhere by then)."""
        if spec.webhook is None:
            return
        try:
            AllowList.parse(settings.webhooks.webhook_allow).entry_for(spec.webhook.url)
        except WebhookRefused as exc:
            raise SubmissionRefused("webhook.url", f"webhook URL refused: {exc}") from None

    def check_submission(self, spec: JobSpec, tenant: str, settings: Settings) -> None:
        """The sink is one ``tenant`` may load into."""
        try:
            check_sink_access(spec, tenant, settings)
        except SinkNotAllowed as exc:
            raise SubmissionRefused(exc.field, str(exc)) from None

    def check_budget(self, ctx: JobContext, spec: JobSpec, tenant: str) -> None:
        """The job's estimated tokens are within its ``limits.max_tokens`` (products/estimate/token_budget.py)."""
        check_token_budget(ctx, spec, tenant)

    def job_planned(self, job: JobHandle) -> None:
        announce_job_running(job)  # only if its webhook asks for job.running

    def job_ended(self, job: JobHandle, manifest: JobManifest) -> None:
        send_pending_loads(job, manifest)  # its own step: a sink never holds the job back
        announce_job_end(job, manifest)

