"""A job's token budget at run time (``limits.max_tokens``, docs/budgets.md).

Its tokens are its ``usage.tokens``: what the model ran for its committed shards (reused and
carried rows cost none), plus, while a shard runs, what that shard has run so far. Once they
pass the limit the job stops as a cancel does (the engine step that passed it is the last: a shard
looks after each step, so a job overruns its limit by at most what its running shards ran in one
``cancel_check_interval_s`` and the step in flight): the stop is a cancel request whose reason is
``BUDGET_REASON``, so every shard, the dispatch and the finalizer already know what to do; the
records it stopped are ``not_processed`` with the code ``budget_exceeded``, and the job ends
``cancelled`` with an ``error`` that says so (no new state: a cancel's moves are the ones it takes).
"""
from __future__ import annotations

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.shards.shard_attempt import BUDGET_EXCEEDED_CODE, NOT_PROCESSED_CODE

BUDGET_REASON = "budget_exceeded"  # the cancel request's reason when the budget stopped the job


def token_limit(job: JobHandle) -> int | None:
    """The job's ``limits.max_tokens`` (the operator's default was written into the spec at submit)."""
    limits = job.spec.limits
    return None if limits is None else limits.max_tokens


def committed_tokens(job: JobHandle) -> int:
    """The tokens of the job's counted shards (the status cache's counter, kept by ``record_shard``)."""
    stored = job.ctx.status.field(job.id, "tokens")
    return int(stored) if stored else 0


def budget_passed(job: JobHandle, running_tokens: int = 0) -> bool:
    """True once the committed tokens, and ``running_tokens`` of a shard still running, pass the limit.
    Reaching it exactly is not passing it: what is left may cost nothing (repeats, reused texts), and
    the submit check accepts a job whose exact count equals its limit."""
    limit = token_limit(job)
    return limit is not None and committed_tokens(job) + running_tokens > limit


def stop_for_budget(job: JobHandle) -> None:
    """Ask the job to stop as a cancel does (idempotent: the first stop request's reason stays)."""
    job.ledger.request_cancel(BUDGET_REASON)
    job.ctx.fair.close(job.id)  # no more of its shards go out
    job.ctx.status.advance_to(job.id, JobState.CANCELLING)


def stopped_by_budget(job: JobHandle) -> bool:
    return job.ledger.cancel_reason() == BUDGET_REASON


def unrun_code(job: JobHandle) -> tuple[str, str]:
    """The code and message of a record a stop left unembedded: the budget's, or a cancel's."""
    if stopped_by_budget(job):
        return BUDGET_EXCEEDED_CODE, f"the job reached its token budget (limits.max_tokens = {token_limit(job)}) " \
                                     "before this record was embedded"
    return NOT_PROCESSED_CODE, "the job was cancelled before this record was embedded"


def budget_error(limit: int | None, used: int, not_processed: int) -> str:
    """The ended job's ``error``: what stopped it, and what it left."""
    return (f"budget_exceeded: the job ran {used} tokens and its limit is {limit} (limits.max_tokens); "
            f"{not_processed} records were not processed (code budget_exceeded in the error file, or in shards "
            "never started: the manifest's shards.not_started)")
