"""What one load must do to make a store hold exactly a job's rows: compare the store's keys with
the job's, document by document.

A document is *unchanged* when the store holds exactly its keys, each with the job's content hash
and vector origin: its rows are not touched. Every other document of the job is *changed* (new,
edited, re-embedded by another model, or half-loaded by an interrupted load): its rows are written.
A stored document the job does not have is *gone*: its rows are deleted, unless the job kept it
(``kept``: documents whose records failed this run keep their earlier rows). Stale keys are the
stored keys of changed and gone documents that the job's rows do not have.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from poolq.jobs.sinks.sink import RowKey

_Signature = tuple[str | None, str | None]  # (content_hash, vector_origin)


@dataclass(frozen=True)
class SyncPlan:
    changed: frozenset[str]  # documents whose rows are written
    stale: frozenset[RowKey]  # stored rows deleted
    upserted: int  # rows written
    unchanged: int  # rows left alone


def _by_document(keys: Iterable[tuple[str, int, str | None, str | None]]) -> dict[str, dict[int, _Signature]]:
    documents: dict[str, dict[int, _Signature]] = defaultdict(dict)
    for record_id, chunk_index, digest, origin in keys:
        documents[record_id][chunk_index] = (digest, origin)
    return documents


def _rows(table: pa.Table) -> Iterable[tuple[str, int, str | None, str | None]]:
    return zip(*(table.column(name).to_pylist() for name in ("id", "chunk_index", "content_hash", "vector_origin")))


def plan_sync(stored: pa.Table, current: pa.Table, kept: frozenset[str] = frozenset()) -> SyncPlan:
    """``stored`` and ``current``: id, chunk_index, content_hash, vector_origin of every row."""
    in_store = _by_document(_rows(stored))
    in_job = _by_document(_rows(current))
    changed = frozenset(doc for doc, rows in in_job.items() if in_store.get(doc) != rows)
    gone = frozenset(doc for doc in in_store if doc not in in_job and doc not in kept)
    stale = frozenset((doc, index) for doc in changed | gone for index in in_store.get(doc, {})
                      if index not in in_job.get(doc, {}))
    return SyncPlan(
        changed=changed, stale=stale,
        upserted=sum(len(in_job[doc]) for doc in changed),
        unchanged=sum(len(rows) for doc, rows in in_job.items() if doc not in changed),
    )
