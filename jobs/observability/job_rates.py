"""A job's pace as its status shows it: tokens/s, documents/s and the time left.

The time left counts tokens, not documents: documents differ a thousandfold in length, tokens
are what a worker spends its time on. The tokens still to go are the job's estimated total
(``JobEstimate``: what the records tokenized so far cost, plus the characters still to go at the
characters per token measured on them) less those done; the pace is the job's average since it
started, running shards' progress included, so a job at a steady speed sees its estimate hold
or fall, never jump with a shard's commit.
"""
from __future__ import annotations

from datetime import datetime, timezone

from poolq.jobs.spec.job_status import JobRates, JobStatus


def job_rates(status: JobStatus, now: datetime | None = None) -> JobRates:
    """Rates over the job's running time so far (to ``finished_at`` once it finished)."""
    if status.started_at is None:
        return JobRates()
    end = status.finished_at or now or datetime.now(timezone.utc)
    elapsed = (end - status.started_at).total_seconds()
    documents = status.counts.completed + status.counts.failed + status.in_progress.documents
    tokens = status.usage.tokens + status.in_progress.tokens
    if elapsed <= 0 or not (documents or tokens):
        return JobRates()
    rates = JobRates(tokens_per_s=tokens / elapsed, documents_per_s=documents / elapsed)
    if status.status.is_terminal:
        return rates.model_copy(update={"eta_s": 0.0})
    if tokens and status.estimate.measured and status.estimate.tokens is not None:
        return rates.model_copy(update={"eta_s": max(0.0, (status.estimate.tokens - tokens) * elapsed / tokens)})
    if documents and status.counts.total is not None:  # nothing embedded yet (every record carried or failed)
        return rates.model_copy(update={"eta_s": max(0.0, (status.counts.total - documents) * elapsed / documents)})
    return rates
