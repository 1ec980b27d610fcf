"""What a running shard does between two engine steps: report its progress, look for a cancel,
and stop its job once the job's token budget is passed (``budget.py``).

The engine calls :class:`StepWatch` after every step (``PoolingEngine.run(..., on_step=...)``),
about every ``max_num_batched_tokens`` tokens, so a shard's progress moves and a cancel stops it
within a step, even in the middle of one very long document. Both are rate-limited: progress
goes to the status store at most every ``progress_interval_s``, the cancel marker is read at most
every ``cancel_check_interval_s``, and so is the budget (the job's committed tokens and this shard's
so far): a job may run past its limit by what its running shards run in one such interval.
"""
from __future__ import annotations

import logging
import time

from poolq.engine.scheduling.step import StepOutput
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.steps.shards.budget import budget_passed, stop_for_budget, token_limit

log = logging.getLogger(__name__)


class ShardCancelled(Exception):
    """The job was cancelled while this shard ran; it stops between two engine steps."""


class StepWatch:
    """The shard's running totals, reported now and then; raises :class:`ShardCancelled` between
    steps once the job's cancel is requested."""

    def __init__(self, job: JobHandle, unit: str) -> None:
        self.job, self.unit = job, unit
        reliability = job.ctx.settings.reliability
        self.progress_interval_s, self.cancel_interval_s = reliability.progress_interval_s, reliability.cancel_check_interval_s
        now = time.monotonic()
        self.next_report, self.next_cancel_check = now + self.progress_interval_s, now + self.cancel_interval_s
        self.documents = self.tokens = self.planned_tokens = self.planned_chars = 0
        self.limited = token_limit(job) is not None

    def __call__(self, step: StepOutput) -> None:
        self.documents += len(step.finished)
        self.tokens += step.tokens
        self.planned_tokens += step.planned_tokens
        self.planned_chars += step.planned_chars
        now = time.monotonic()
        if now >= self.next_report:
            self.next_report = now + self.progress_interval_s
            self._report()
        if now >= self.next_cancel_check:
            self.next_cancel_check = now + self.cancel_interval_s
            if self.job.ledger.cancel_requested():
                raise ShardCancelled()
            if self.limited and budget_passed(self.job, self.tokens):
                stop_for_budget(self.job)
                raise ShardCancelled()

    def _report(self) -> None:
        """Best effort: a lost report costs nothing but a still progress bar (the commit counts)."""
        try:
            self.job.ctx.status.note_progress(self.job.id, self.unit, self.documents, self.tokens, self.planned_tokens,
                                              self.planned_chars)
        except Exception as exc:  # noqa: BLE001 - progress is never worth failing a shard for
            log.debug("progress of %s/%s not reported: %s", self.job.id, self.unit, exc)
