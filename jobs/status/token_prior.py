"""An unmeasured job's tokens at the characters per token this deployment measured for its model.

Until some of a job's own text is tokenized (``estimate.measured`` false), the status store counts
its planned characters at a fixed 4 a token (``status_store.token_estimate``: it sees one job's
fields only). The ETA benchmark's English paragraphs run 4.85 under MiniLM's tokenizer, so the first
ETA a job was given counted 21 % too many tokens (docs/benchmarks.md#eta-accuracy). The workers report the
characters of every shard they run beside its tokens (``worker_throughput.py``), so the ratio the
model showed on the jobs this deployment already ran is a better prior; a job's own measurement
replaces it as soon as it has one. Without any report the fixed 4 stands.
"""
from __future__ import annotations

from poolq.jobs.context import JobContext
from poolq.jobs.coordination.status_store import DEFAULT_CHARS_PER_TOKEN
from poolq.jobs.coordination.worker_throughput import chars_per_token
from poolq.jobs.spec.job_status import JobEstimate, JobStatus


def needs_prior(status: JobStatus) -> bool:
    """The job is planned, unfinished, and none of its text is tokenized yet."""
    return status.estimate.tokens is not None and not status.estimate.measured and not status.status.is_terminal


def with_prior(status: JobStatus, prior: float | None) -> JobStatus:
    """``status`` with its unmeasured estimate counted at ``prior`` characters a token (unchanged
    when it is measured, not planned, finished, or ``prior`` is None)."""
    tokens = status.estimate.tokens
    if prior is None or prior <= 0 or tokens is None or not needs_prior(status):
        return status
    characters = tokens * DEFAULT_CHARS_PER_TOKEN  # what token_estimate divided
    done = status.usage.tokens + status.in_progress.tokens
    return status.model_copy(update={"estimate": JobEstimate(tokens=max(done, round(characters / prior)), measured=False)})


def priced(ctx: JobContext, statuses: list[JobStatus]) -> list[JobStatus]:
    """Each status with its model's prior as this deployment measured it (one read of the throughput
    board per model that a job needing it uses; none when no job needs it)."""
    unmeasured = {status.model for status in statuses if needs_prior(status)}
    priors = {model: chars_per_token(ctx.throughput.rates(model)) for model in unmeasured}
    return [with_prior(status, priors.get(status.model)) for status in statuses]
