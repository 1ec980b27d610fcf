"""The one interface every sink implements, and what a load hands it.

A load is computed by ``sync_plan.py`` from the store's keys and the job's rows, so each store only
does two things: tell which rows it holds (``stored_keys``), and apply one load (``apply``) so
that afterwards it holds every row of ``SinkLoad.rows`` (upserted by key ``(id, chunk_index)``)
and none of ``SinkLoad.stale`` (deleted). Applying the same load twice leaves the same rows:
loads are idempotent, and a load interrupted half-way is finished by the next one.

Every row records its owner (``RowOwner``: the tenant and the lineage of the job that wrote it), and
each store enforces it itself, whatever the plan says: a load deletes only rows of its own owner and
overwrites only those or rows without an owner (written before owners were recorded); another
owner's row is never touched. Rows without an owner are never deleted.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

# Every sink row: its key, the document's content hash, the digest of what made its vectors
# (model files, dtype, options: ``vector_origin``), its owner, then the vector columns, then the carried fields.
KEY_COLUMNS = ("id", "chunk_index")
TENANT_COLUMN, LINEAGE_COLUMN = "poolq_tenant", "poolq_lineage"  # prefixed: a carried field may be named "tenant"
OWNER_COLUMNS = (TENANT_COLUMN, LINEAGE_COLUMN)
SYNC_COLUMNS = ("id", "chunk_index", "content_hash", "vector_origin", *OWNER_COLUMNS)
DENSE_COLUMN = "embedding"  # fixed_size_list<float32>[d]: decoded from the part's dtype
SPARSE_INDICES, SPARSE_VALUES = "sparse_indices", "sparse_values"  # list<int32>, list<float32>
MULTI_COLUMN = "token_embeddings"  # list<fixed_size_list<float32>[d]>: one vector per token

STORED_KEYS_SCHEMA = pa.schema([
    pa.field("id", pa.string()), pa.field("chunk_index", pa.int32()),
    pa.field("content_hash", pa.string()), pa.field("vector_origin", pa.string()),
    pa.field(TENANT_COLUMN, pa.string()), pa.field(LINEAGE_COLUMN, pa.string()),
])

RowKey = tuple[str, int]


@dataclass(frozen=True)
class RowOwner:
    """Whose a sink row is: the tenant, and the lineage of the job that wrote it (the first job of
    its ``incremental_from`` chain: a schedule's runs are one lineage). Rows written before owners
    were recorded have none (both columns null)."""

    tenant: str
    lineage: str

    def owns(self, tenant: str | None, lineage: str | None) -> bool:
        return (tenant, lineage) == (self.tenant, self.lineage)

    def may_overwrite(self, tenant: str | None, lineage: str | None) -> bool:
        """A stored row this owner's load may write over: its own, or one without an owner."""
        return lineage is None or self.owns(tenant, lineage)


class SinkError(RuntimeError):
    """A load failed for a reason retrying will not fix (a table of another shape, a task the
    store cannot hold). Its message names the sink and the cause, never a credential."""


class SinkUnavailable(ConnectionError):
    """The store could not be reached or timed out: the load is retried (a ConnectionError, so
    ``jobs/steps/failures.py`` classifies it retryable)."""


@dataclass(frozen=True)
class SinkSchema:
    """What the rows of one job hold, so a sink can create its table: the dense vectors' dtype
    (``float32``, ``float16``, ``int8``, ``binary``; the store's type follows it) and dimensions,
    whether there are sparse vectors (and the vocabulary size), token vectors, carried fields."""

    dense_dtype: str | None = None
    dimensions: int | None = None
    sparse: bool = False
    sparse_dimensions: int | None = None
    multi_dimensions: int | None = None
    fields: tuple[pa.Field, ...] = ()

    @property
    def vector_columns(self) -> tuple[str, ...]:
        dense = (DENSE_COLUMN,) if self.dense_dtype else ()
        sparse = (SPARSE_INDICES, SPARSE_VALUES) if self.sparse else ()
        return dense + sparse + ((MULTI_COLUMN,) if self.multi_dimensions else ())

    def arrow_schema(self) -> pa.Schema:
        """The rows' Arrow schema, as ``sink_rows.py`` makes them."""
        columns = [*STORED_KEYS_SCHEMA]
        if self.dense_dtype:
            columns.append(pa.field(DENSE_COLUMN, pa.list_(pa.float32(), self.dimensions or 0)))
        if self.sparse:
            columns += [pa.field(SPARSE_INDICES, pa.list_(pa.int32())), pa.field(SPARSE_VALUES, pa.list_(pa.float32()))]
        if self.multi_dimensions:
            columns.append(pa.field(MULTI_COLUMN, pa.list_(pa.list_(pa.float32(), self.multi_dimensions))))
        return pa.schema([*columns, *self.fields])


@dataclass(frozen=True)
class SinkLoad:
    """One load by ``owner``: write ``rows`` (batches in ``schema.arrow_schema()``, owner columns
    filled with ``owner``), delete the ``stale`` keys that ``owner`` holds."""

    schema: SinkSchema
    owner: RowOwner
    rows: Iterable[pa.Table]
    stale: frozenset[RowKey] = field(default_factory=frozenset)


class Sink(ABC):
    """A vector store rows are loaded into."""

    @abstractmethod
    def stored_keys(self) -> pa.Table:
        """Every stored row's ``SYNC_COLUMNS`` (``STORED_KEYS_SCHEMA``; owner columns null for rows
        without one); empty if the table does not exist."""

    @abstractmethod
    def apply(self, load: SinkLoad) -> None:
        """Upsert ``load.rows`` by key, except over rows of another owner (those are left as they
        are), and delete the ``load.stale`` rows that ``load.owner`` owns; create the table if
        configured to (``SinkError`` if it is missing and may not be created), and add the owner
        columns to a table made before them."""

    def close(self) -> None:
        """Release connections; the sink is not used afterwards."""
