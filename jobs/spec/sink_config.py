"""Sinks as a job names them, and the states of a load (the operator's ``SinkConfig``: jobs/sink_settings.py).

A job names a sink (``"sink": "search-db"``), never a location or a password: the operator maps
names to stores in ``POOLQ_SINKS='{"search-db": "postgresql://…"}'`` (or an object with the
table options of ``SinkConfig``), and grants names to tenants in ``POOLQ_SINK_GRANTS``. The URL is a
``SecretStr``: it is never printed, logged or written into a status or manifest.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import BaseModel, Field, TypeAdapter

# A sink's name as jobs, schedules, manifests and grants spell it.
SINK_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
SinkName = Annotated[str, Field(pattern=SINK_NAME_PATTERN, description="a sink the operator configured (POOLQ_SINKS)")]


class SinkState:
    """A sink load's states, as the manifest's ``sinks`` entries spell them."""

    PENDING: Final = "pending"  # the job finished; the load is queued (or retried)
    SUCCEEDED: Final = "succeeded"
    FAILED: Final = "failed"  # the load failed: retry it (`poolq sink retry JOB`); the job's own state is unaffected
    SKIPPED: Final = "skipped"  # nothing to load: the job failed or was cancelled (or a newer run of its lineage loaded)


SinkStateName = Literal["pending", "succeeded", "failed", "skipped"]


class SinkOutcome(BaseModel):
    """One sink's load of a job's rows (docs/sinks/): its state and what it did, in rows; the
    manifest's ``sinks`` entries and the status's ``sinks``.

    ``upserted``: rows written (new, or replacing a changed document's); ``deleted``: rows removed
    (documents gone from the input, chunks a changed document no longer has); ``unchanged``: rows
    left as they were. ``error`` names why a load failed (never a credential)."""

    name: str
    state: SinkStateName
    upserted: int = 0
    deleted: int = 0
    unchanged: int = 0
    error: str | None = None
    finished_at: datetime | None = None


# A job's outcomes as one JSON value (the status cache's ``sinks`` field).
SINK_OUTCOMES = TypeAdapter(list[SinkOutcome])


def sink_outcomes_json(sinks: Sequence[SinkOutcome]) -> str:
    """``sinks`` (the manifest's entries, or the status's) as the status cache keeps them."""
    return SINK_OUTCOMES.dump_json(list(sinks)).decode()
