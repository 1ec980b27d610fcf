"""A job's Parquet parts as sink rows: the key, the sync columns, decoded vectors, carried fields.

Dense vectors are decoded from the part's dtype to float32 (``binary``: +1/-1 signs; a store keeps
them as bits where it has a bit type); each store then keeps the type that follows the dtype.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.output_effect import OutputEffect, counted_options
from poolq.products.sinks.sink import (
    DENSE_COLUMN,
    LINEAGE_COLUMN,
    MULTI_COLUMN,
    SPARSE_INDICES,
    SPARSE_VALUES,
    STORED_KEYS_SCHEMA,
    TENANT_COLUMN,
    RowOwner,
    SinkError,
    SinkSchema,
)
from poolq.storage import EmbeddingCodec

# The columns a sink row holds of its own: its key and origin, and its vectors.
SINK_ROW_COLUMNS = frozenset({*STORED_KEYS_SCHEMA.names, DENSE_COLUMN, SPARSE_INDICES, SPARSE_VALUES, MULTI_COLUMN})
SINK_TASKS = frozenset({"embed", "sparse_embed", "token_embed"})


# The options an origin counts (jobs/spec/output_effect.py declares each field's effect). The engine's
# fields add nothing beside ``engines`` but origins always held them: rows loaded before keep theirs.
ORIGIN_COUNTS = frozenset({OutputEffect.VALUES, OutputEffect.ROWS, OutputEffect.ENGINE})
# Origins made before these were declared neutral held their values: at their defaults, those still match.
_HELD_AT_DEFAULT = ("reuse", "webhook")


def vector_origin(manifest: JobManifest) -> str:
    """What made a job's rows, as a short digest: model, engines (files and dtype) and the options
    that change rows. Rows of two jobs with equal origins and content hashes are equal; where the
    input was, a webhook, the reuse choice or the sink itself change no origin."""
    options = counted_options(manifest.options, ORIGIN_COUNTS, _HELD_AT_DEFAULT)
    made_by = json.dumps({"model": manifest.model, "engines": manifest.engines, "options": options}, sort_keys=True)
    return hashlib.sha256(made_by.encode()).hexdigest()[:32]


def sink_schema(spec: JobSpec, part_schema: pa.Schema, dimensions: int | None,
                sparse_dimensions: int | None) -> SinkSchema:
    """What ``spec``'s rows hold (SinkError for a task no sink takes: classify, score, ...)."""
    tasks = set(spec.task) if isinstance(spec.task, list) else {spec.task}
    if not tasks <= SINK_TASKS:
        raise SinkError(f"task {spec.task_label} has no vectors to load; sinks take embed, sparse_embed and token_embed")
    fields = _carried_fields(spec, part_schema)
    return SinkSchema(
        dense_dtype=spec.output.dtype if "embed" in tasks else None,
        dimensions=dimensions if "embed" in tasks else None,
        sparse="sparse_embed" in tasks,
        sparse_dimensions=sparse_dimensions if "sparse_embed" in tasks else None,
        multi_dimensions=dimensions if "token_embed" in tasks else None,
        fields=fields,
    )


def sink_row_columns_named(names: list[str] | None) -> list[str]:
    """The carried fields ``names`` that a sink row holds a column of its own by (its key, its origin,
    its vectors): such a field cannot be loaded beside them (submission refuses it)."""
    return sorted(set(names or ()) & SINK_ROW_COLUMNS)


def _carried_fields(spec: JobSpec, part_schema: pa.Schema) -> tuple[pa.Field, ...]:
    """The job's carried fields, as the parts type them: by their names (a field may be named like a
    part column another task writes: a whole-document job's ``split``)."""
    names = list(spec.output.include_fields or ())
    taken = sink_row_columns_named(names)
    if taken:
        raise SinkError(f"output.include_fields names {taken[0]!r}, a column every sink row has; rename that field")
    missing = [name for name in names if name not in part_schema.names]
    if missing:
        raise SinkError(f"the job's parts have no column {missing[0]!r} for its carried field")
    return tuple(part_schema.field(name) for name in names)


def sink_rows(part: pa.Table, schema: SinkSchema, codec: EmbeddingCodec | None, origin: str, owner: RowOwner) -> pa.Table:
    """``part``'s rows in ``schema.arrow_schema()``, owned by ``owner``: chunk_index 0 for whole-document
    rows (``codec``: the part's vectors', None where ``schema`` has no dense or token vectors)."""
    count = part.num_rows
    chunk_index = part.column("chunk_index") if "chunk_index" in part.column_names else pa.array(np.zeros(count, np.int32))
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "id": part.column("id"),
        "chunk_index": pc.cast(chunk_index, pa.int32()),
        "content_hash": part.column("content_hash") if "content_hash" in part.column_names else pa.nulls(count, pa.string()),
        "vector_origin": pa.array([origin] * count, pa.string()),
        TENANT_COLUMN: pa.array([owner.tenant] * count, pa.string()),
        LINEAGE_COLUMN: pa.array([owner.lineage] * count, pa.string()),
    }
    if schema.dense_dtype and codec:
        columns[DENSE_COLUMN] = _dense(part.column(DENSE_COLUMN), codec, schema.dimensions or 0)
    if schema.sparse:
        columns[SPARSE_INDICES] = part.column(SPARSE_INDICES)
        columns[SPARSE_VALUES] = part.column(SPARSE_VALUES)
    if schema.multi_dimensions and codec:
        columns[MULTI_COLUMN] = _multi(part.column(MULTI_COLUMN), codec, schema.multi_dimensions)
    for field in schema.fields:
        columns[field.name] = part.column(field.name)
    return pa.Table.from_pydict(columns, schema=schema.arrow_schema())


def _dense(column: pa.ChunkedArray, codec: EmbeddingCodec, dimensions: int) -> pa.Array:
    vectors = codec.decode(column, dimensions).astype(np.float32, copy=False)
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dimensions)


def _multi(column: pa.ChunkedArray, codec: EmbeddingCodec, dimensions: int) -> pa.Array:
    """Lists of token vectors: the tokens decoded at once, then cut back into their rows."""
    lists = column.combine_chunks()
    tokens = _dense(pa.chunked_array([lists.flatten()]), codec, dimensions)
    offsets = pc.subtract(lists.offsets, lists.offsets[0])
    return pa.ListArray.from_arrays(offsets, tokens)


def require_hashes(rows: pa.Table) -> None:
    """Rows written before content hashes existed cannot be kept in sync."""
    if rows.num_rows and rows.column("content_hash").null_count:
        raise SinkError("the job's parts have rows without content_hash (written by an older poolq); run the job again")
