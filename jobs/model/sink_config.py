"""Sinks as a job names them, and the states of a load (the operator's ``SinkConfig``: jobs/sink_settings.py).

A job names a sink (``"sink": "search-db"``), never a location or a password: the operator maps
names to stores in ``POOLQ_SINKS='{"search-db": "postgresql://…"}'`` (or an object with the
table options of ``SinkConfig``), and grants names to tenants in ``POOLQ_SINK_GRANTS``. The URL is a
``SecretStr``: it is never printed, logged or written into a status or manifest.
"""
from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

# A sink's name as jobs, schedules, manifests and grants spell it.
SINK_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
SinkName = Annotated[str, Field(pattern=SINK_NAME_PATTERN, description="a sink the operator configured (POOLQ_SINKS)")]


class SinkState:
    """A sink load's states, as the manifest's ``sinks`` entries spell them."""

    PENDING: Final = "pending"  # the job finished; the load is queued (or retried)
    SUCCEEDED: Final = "succeeded"
    FAILED: Final = "failed"  # the load failed: retry it (`poolq sink retry JOB`); the job's own state is unaffected
    SKIPPED: Final = "skipped"  # nothing to load: the job failed or was cancelled


SinkStateName = Literal["pending", "succeeded", "failed", "skipped"]
