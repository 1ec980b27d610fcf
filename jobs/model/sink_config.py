"""Sinks as the operator configures them (``POOLQ_SINKS``) and as a job names them.

A job names a sink (``"sink": "search-db"``), never a location or a password: the operator maps
names to stores in ``POOLQ_SINKS='{"search-db": "postgresql://…"}'`` (or an object with the
table options below), and grants names to tenants in ``POOLQ_SINK_GRANTS``. The URL is a
``SecretStr``: it is never printed, logged or written into a status or manifest.
"""
from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

# A sink's name as jobs, schedules, manifests and grants spell it.
SINK_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
SinkName = Annotated[str, Field(pattern=SINK_NAME_PATTERN, description="a sink the operator configured (POOLQ_SINKS)")]
# Table (pgvector), table (LanceDB) or collection (Qdrant) names: plain identifiers, never quoted input.
TABLE_PATTERN = r"^[a-z_][a-z0-9_]{0,62}$"


class SinkConfig(BaseModel):
    """One configured sink. A bare string in ``POOLQ_SINKS`` is its ``url``.

    ``url`` schemes: ``postgresql://`` (pgvector), ``lancedb:///path`` or ``lancedb+s3://bucket/prefix``
    (LanceDB), ``qdrant+local:///path``, ``qdrant://host:6333``, ``qdrants://host:6333`` (Qdrant),
    ``memory://name`` (in-process, for tests and ``poolq embed``)."""

    model_config = ConfigDict(extra="forbid")

    url: SecretStr
    table: str = Field("poolq_vectors", pattern=TABLE_PATTERN, description="table or collection the rows land in")
    create_table: bool = Field(True, description="create the table (collection) when it does not exist")
    index: Literal["hnsw", "ivfflat"] | None = Field(None, description="pgvector: build this index when creating the "
                                                     "table; none otherwise (load first, index later)")
    batch_rows: int = Field(2000, ge=1, le=100_000, description="rows per COPY batch / upsert call")

    @model_validator(mode="before")
    @classmethod
    def _bare_url(cls, value: object) -> object:
        return {"url": value} if isinstance(value, str) else value

    @property
    def scheme(self) -> str:
        url = self.url.get_secret_value()
        return url.split("://", 1)[0].lower() if "://" in url else ""


class SinkState:
    """A sink load's states, as the manifest's ``sinks`` entries spell them."""

    PENDING: Final = "pending"  # the job finished; the load is queued (or retried)
    SUCCEEDED: Final = "succeeded"
    FAILED: Final = "failed"  # the load failed: retry it (`poolq sink retry JOB`); the job's own state is unaffected
    SKIPPED: Final = "skipped"  # nothing to load: the job failed or was cancelled


SinkStateName = Literal["pending", "succeeded", "failed", "skipped"]
