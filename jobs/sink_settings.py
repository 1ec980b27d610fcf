"""One sink as the operator configures it (``POOLQ_SINKS``' values, docs/sinks/): where rows land and how.
A job only names one (jobs/spec/sink_config.py); ``Settings.vector_sinks.sinks`` holds them by name."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class SinkConfig(BaseModel):
    """One configured sink. A bare string in ``POOLQ_SINKS`` is its ``url``.

    ``url`` schemes: ``postgresql://`` (pgvector), ``lancedb:///path`` or ``lancedb+s3://bucket/prefix``
    (LanceDB), ``qdrant+local:///path``, ``qdrant://host:6333``, ``qdrants://host:6333`` (Qdrant),
    ``memory://name`` (in-process, for tests and ``poolq embed``)."""

    model_config = ConfigDict(extra="forbid")

    url: SecretStr
    table: str = Field("poolq_vectors", pattern=r"^[a-z_][a-z0-9_]{0,62}$", description="table or collection the rows land in")
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
