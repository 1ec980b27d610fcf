"""A job's token budget at submit (``limits.max_tokens``, docs/budgets.md): refused when the estimate
says it would run more.

The estimate's ``computed_tokens`` is what the workers would run (repeats computed once, texts the
tenant's reuse store holds already: none of those count). Where its sample is the whole input (a
small input: every document tokenized) it is the job's ``usage.tokens`` exactly, and the job is
refused as soon as it exceeds the limit. Past that it is an extrapolation, refused only when it
exceeds the limit by more than ``Settings.limits.budget_estimate_margin``, and the message states that
margin; a job let through still stops at its limit while it runs (``jobs/steps/shards/budget.py``).
The pass over the input is the estimate's own, bounded by ``estimate_max_seconds``. An incremental
job (``incremental_from`` a run it can carry from) is not checked at submit: the estimate reads no
baseline, so it counts the documents the job would carry, which run nothing.
"""
from __future__ import annotations

from poolq.jobs.context import JobContext
from poolq.jobs.inputs.shard_input import InputChanged
from poolq.jobs.job_hooks import SubmissionRefused
from poolq.jobs.spec.job_spec import JobSpec
from poolq.products.estimate.estimator import estimate_job
from poolq.products.estimate.job_estimate import JobEstimate
from poolq.products.estimate.sample_tokenizer import TokenizerMissing
from poolq.storage import ObjectNotFoundError
from poolq.storage.parquet_input import MissingColumnError, NotParquetError

_UNREADABLE_INPUT = (ObjectNotFoundError, MissingColumnError, NotParquetError, InputChanged)
FIELD = "limits.max_tokens"


def check_token_budget(ctx: JobContext, spec: JobSpec, tenant: str) -> None:
    """SubmissionRefused on ``limits.max_tokens`` if ``spec`` would run more tokens than it allows."""
    if spec.limits is None:
        return
    limit = spec.limits.max_tokens
    try:
        estimate = estimate_job(ctx, spec, tenant)
    except TokenizerMissing:
        return  # no tokenizer.json to count with: the running job still stops at its limit
    except _UNREADABLE_INPUT as exc:
        raise SubmissionRefused("input.uri", f"the input cannot be read: {exc}") from None
    refusal = budget_refusal(estimate, limit, ctx.settings.limits.budget_estimate_margin)
    if refusal is not None:
        raise SubmissionRefused(FIELD, refusal)


def counted_whole(estimate: JobEstimate) -> bool:
    """Every document was read and tokenized, and no repeated id is dropped: ``computed_tokens`` is exact."""
    sample = estimate.sample
    return sample.fraction_read == 1.0 and sample.documents == estimate.documents and "duplicate_id" not in estimate.failed


def budget_refusal(estimate: JobEstimate, limit: int, margin: float) -> str | None:
    """Why a job with this estimate is refused under ``limit`` tokens, or None if it is not. A job that
    carries documents from an earlier run is not refused: its estimate counts them (an upper bound)."""
    if estimate.carries_from is not None:
        return None
    computed = estimate.computed_tokens
    if counted_whole(estimate):
        if computed <= limit:
            return None
        return (f"the job would run {computed} tokens (counted exactly: every document tokenized, reuse deducted), "
                f"more than limits.max_tokens = {limit}")
    lower = int(computed * (1 - margin))
    if lower <= limit:
        return None
    sample = estimate.sample
    return (f"the job would run about {computed} tokens, more than limits.max_tokens = {limit}: estimated from "
            f"{sample.documents} of {estimate.documents} documents ({sample.fraction_read:.0%} of the input read), "
            f"refused because even {margin:.0%} less ({lower}) exceeds the limit")
