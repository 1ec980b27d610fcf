"""How long a Celery task may run, and how a retryable failure's retries back off."""
from __future__ import annotations

from pydantic import Field

from poolq.jobs.settings.group import SettingsGroup


class TaskSettings(SettingsGroup):
    """Celery time limits, ordered soft < hard < visibility_timeout / 2 (checked), and retry backoff."""

    task_soft_time_limit_s: int = 1200
    task_time_limit_s: int = 1500
    visibility_timeout_s: int = 3600
    # Planning reads the whole input in one task (under a renewed lease, so a redelivery past the
    # visibility timeout finds it held and does nothing): its limit is its own, not a shard's.
    plan_soft_time_limit_s: int = Field(6 * 3600, ge=1)
    plan_time_limit_s: int = Field(6 * 3600 + 300, ge=1)
    # A step that failed with a retryable error is retried after base * 2**retry seconds (capped), jittered.
    task_retry_backoff_s: float = Field(1.0, gt=0)
    task_retry_backoff_max_s: float = Field(60.0, gt=0)

    def model_post_init(self, __context: object) -> None:
        if not self.plan_soft_time_limit_s < self.plan_time_limit_s:
            raise ValueError("timeouts must satisfy plan_soft_time_limit_s < plan_time_limit_s")
        # A Redis-broker message unacknowledged past visibility_timeout_s is delivered again.
        if not self.task_soft_time_limit_s < self.task_time_limit_s < self.visibility_timeout_s / 2:
            raise ValueError(
                "timeouts must satisfy task_soft_time_limit_s < task_time_limit_s < visibility_timeout_s / 2; got "
                f"{self.task_soft_time_limit_s}, {self.task_time_limit_s}, {self.visibility_timeout_s}"
            )
