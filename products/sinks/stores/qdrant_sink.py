"""Qdrant: batched upserts of points (one per row) with the row's columns as payload, then the
stale points deleted. Points are named by key (a UUID of ``(id, chunk_index)``), so a retried or
resumed load overwrites the same points: each row is stored once. Before each batch, the points of
its keys that another owner holds are read and left out (``sink.py``; any Qdrant version: no
conditional upsert needed), and the delete names the owner in its filter.

Vectors are named: ``dense`` (cosine; binary jobs as +1/-1 signs), ``sparse`` (a sparse vector),
``multi`` (token_embed: a multivector compared by MaxSim), as the job's task gives them.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from poolq.jobs.sink_settings import SinkConfig
from poolq.products.sinks.sink import (
    DENSE_COLUMN,
    LINEAGE_COLUMN,
    MULTI_COLUMN,
    OWNER_COLUMNS,
    SPARSE_INDICES,
    SPARSE_VALUES,
    STORED_KEYS_SCHEMA,
    TENANT_COLUMN,
    RowKey,
    RowOwner,
    Sink,
    SinkError,
    SinkLoad,
    SinkSchema,
    SinkUnavailable,
)

_POINT_NAMESPACE = uuid.UUID("6f1c3c1e-6d0b-4b8e-9a59-2f6e4c1d7a10")  # poolq's points; fixed forever
DENSE, SPARSE, MULTI = "dense", "sparse", "multi"
_VECTOR_COLUMNS = frozenset({DENSE_COLUMN, SPARSE_INDICES, SPARSE_VALUES, MULTI_COLUMN})


def point_id(key: RowKey) -> str:
    """The point of row ``(id, chunk_index)``: the same UUID on every load."""
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{key[0]}\x00{key[1]}"))


class QdrantSink(Sink):
    def __init__(self, config: SinkConfig, client_options: dict[str, Any]) -> None:
        self.config = config
        self.client_options = client_options
        self._client: QdrantClient | None = None

    @property
    def client(self) -> QdrantClient:
        if self._client is None:
            self._client = QdrantClient(**self.client_options)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def stored_keys(self) -> pa.Table:
        with _translated():
            if not self.client.collection_exists(self.config.table):
                return STORED_KEYS_SCHEMA.empty_table()
            rows, offset = [], None
            while True:
                points, offset = self.client.scroll(self.config.table, limit=1000, offset=offset,
                                                    with_payload=list(STORED_KEYS_SCHEMA.names), with_vectors=False)
                rows += [{name: (point.payload or {}).get(name) for name in STORED_KEYS_SCHEMA.names} for point in points]
                if offset is None:
                    return pa.Table.from_pylist(rows, schema=STORED_KEYS_SCHEMA)

    def apply(self, load: SinkLoad) -> None:
        with _translated():
            self._ensure_collection(load.schema)
            for batch in load.rows:
                for start in range(0, batch.num_rows, self.config.batch_rows):
                    points = list(_points(batch.slice(start, self.config.batch_rows), load.schema))
                    points = self._writable(points, load.owner)
                    if points:
                        self.client.upsert(self.config.table, points=points, wait=True)
            if load.stale:
                self.client.delete(self.config.table, points_selector=models.FilterSelector(filter=models.Filter(must=[
                    models.HasIdCondition(has_id=[point_id(key) for key in sorted(load.stale)]),
                    *_owned_by(load.owner)])), wait=True)

    def _writable(self, points: list[models.PointStruct], owner: RowOwner) -> list[models.PointStruct]:
        """``points`` but those whose stored point another owner holds."""
        stored = self.client.retrieve(self.config.table, ids=[point.id for point in points],
                                      with_payload=list(OWNER_COLUMNS), with_vectors=False)
        taken = {str(point.id) for point in stored
                 if not owner.may_overwrite(*((point.payload or {}).get(name) for name in OWNER_COLUMNS))}
        return [point for point in points if str(point.id) not in taken] if taken else points

    def _ensure_collection(self, schema: SinkSchema) -> None:
        if self.client.collection_exists(self.config.table):
            return
        if not self.config.create_table:
            raise SinkError(f"collection {self.config.table} does not exist and create_table is false")
        dense: dict[str, models.VectorParams] = {}
        if schema.dense_dtype:
            dense[DENSE] = models.VectorParams(size=schema.dimensions or 0, distance=models.Distance.COSINE)
        if schema.multi_dimensions:
            dense[MULTI] = models.VectorParams(size=schema.multi_dimensions, distance=models.Distance.COSINE,
                                               multivector_config=models.MultiVectorConfig(
                                                   comparator=models.MultiVectorComparator.MAX_SIM))
        sparse = {SPARSE: models.SparseVectorParams()} if schema.sparse else None
        self.client.create_collection(self.config.table, vectors_config=dense, sparse_vectors_config=sparse)


def _points(batch: pa.Table, schema: SinkSchema) -> Iterator[models.PointStruct]:
    payload_columns = [name for name in batch.column_names if name not in _VECTOR_COLUMNS]
    payloads = batch.select(payload_columns).to_pylist()
    dense = batch.column(DENSE_COLUMN).to_pylist() if schema.dense_dtype else None
    multi = batch.column(MULTI_COLUMN).to_pylist() if schema.multi_dimensions else None
    sparse = (zip(batch.column(SPARSE_INDICES).to_pylist(), batch.column(SPARSE_VALUES).to_pylist())
              if schema.sparse else None)
    for row, payload in enumerate(payloads):
        vector: dict[str, Any] = {}
        if dense is not None:
            vector[DENSE] = dense[row]
        if multi is not None:
            vector[MULTI] = multi[row]
        if sparse is not None:
            indices, values = next(sparse)
            vector[SPARSE] = models.SparseVector(indices=indices, values=values)
        yield models.PointStruct(id=point_id((payload["id"], payload["chunk_index"])), vector=vector, payload=payload)


def _owned_by(owner: RowOwner) -> list[models.Condition]:
    return [models.FieldCondition(key=TENANT_COLUMN, match=models.MatchValue(value=owner.tenant)),
            models.FieldCondition(key=LINEAGE_COLUMN, match=models.MatchValue(value=owner.lineage))]


@contextmanager
def _translated() -> Iterator[None]:
    """Qdrant's errors as sink errors: an unreachable server retryable, a refusal named and fatal."""
    try:
        yield
    except ResponseHandlingException as exc:
        raise SinkUnavailable(f"Qdrant unreachable: {exc}") from None
    except UnexpectedResponse as exc:
        raise SinkError(f"Qdrant refused: {exc.status_code} {exc.reason_phrase}") from None
