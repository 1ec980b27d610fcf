"""``POST /v1/jobs/estimate``: what a job would cost, before it is submitted. The body is a job's,
refused exactly as ``POST /v1/jobs`` refuses it (the same ``check_job``, the same answers); then
the input is read once and a sample tokenized, in a thread pool of its own
(``Settings.estimates.estimate_concurrency`` at once), so a big input never stalls the event loop or the
threads other routes run on."""
from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError

from poolq.api.server.dependencies import Caller, Context
from poolq.api.server.guards.estimate_pool import run_checks
from poolq.api.server.guards.security import AUTH_RESPONSES
from poolq.api.server.guards.strict_json import StrictJsonRoute, strict_body
from poolq.api.server.routes.jobs import submission_refusals
from poolq.jobs import JobContext, JobSpec, check_job
from poolq.jobs.inputs.shard_input import InputChanged
from poolq.products.estimate.estimator import estimate_job
from poolq.products.estimate.job_estimate import JobEstimate
from poolq.products.estimate.sample_tokenizer import TokenizerMissing
from poolq.storage import ObjectNotFoundError
from poolq.storage.parquet_input import MissingColumnError, NotParquetError

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=StrictJsonRoute, responses=AUTH_RESPONSES)
_UNREADABLE_INPUT = (ObjectNotFoundError, MissingColumnError, NotParquetError, InputChanged)


@router.post("/estimate", response_model=JobEstimate)
async def estimate(ctx: Context, spec: JobSpec, request: Request, principal: Caller,
                   _strict: None = strict_body(JobSpec)) -> JobEstimate:
    """Documents, characters, tokens and rows the job would make, the documents it would cut or
    fail (by reason), duplicates within its input, tokens already available for reuse, and its
    time on the compute workers alive now (none when no worker has measured its throughput).
    Nothing is submitted. An input that cannot be read is a 422 at ``input.uri``; a model without
    ``tokenizer.json`` (a slow tokenizer only) a 422 at ``model``."""
    with submission_refusals():
        # A Hub model pinned to its commit, as a submission would (a download: off the event loop); the
        # budget is not checked (that check is this estimate)
        spec = await run_checks(request, partial(check_job, ctx, spec, principal.tenant, budget=False), estimates=False)
    return await run_checks(request, partial(_estimate, ctx, spec, principal.tenant), estimates=True)


def _estimate(ctx: JobContext, spec: JobSpec, tenant: str) -> JobEstimate:
    try:
        return estimate_job(ctx, spec, tenant)
    except _UNREADABLE_INPUT as exc:
        raise RequestValidationError([{"loc": ("body", "input", "uri"), "msg": f"the input cannot be read: {exc}",
                                       "type": "value_error"}]) from None
    except TokenizerMissing as exc:  # a job of it is accepted (not checked at submit); its estimate is not made
        raise RequestValidationError([{"loc": ("body", "model"), "msg": f"the model cannot be estimated: {exc}",
                                       "type": "value_error"}]) from None
