"""What one load must do to make a store hold exactly a job's rows: compare the store's keys with
the job's, document by document, over the rows the job's owner holds (``RowOwner``: its tenant and
lineage); every other row of the store is left out of the comparison, so nothing a load does can
delete it.

A document is *unchanged* when the owner holds exactly its keys, each with the job's content hash
and vector origin: its rows are not touched. Every other document of the job is *changed* (new,
edited, re-embedded by another model, or half-loaded by an interrupted load): its rows are written.
An owned document the job does not have is *gone*: its rows are deleted, unless the job kept it
(``kept``: documents whose records failed this run keep their earlier rows). Stale keys are the
owned keys of changed and gone documents that the job's rows do not have.

Keys are the store's, ``(id, chunk_index)``, one row each whoever wrote it. A document of the job
whose keys another owner's rows hold is *held*: unchanged if those rows are exactly the job's (same
keys, hashes and origin: an earlier job of other lineage loaded the same documents; they stay that
lineage's), and otherwise its keys are *foreign*: the load must not write them (``sink_load.py``
refuses it). A row without an owner (written before owners were recorded) is neither owned nor
held: the job writes over it if it has its key (taking it over), and never deletes it.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from poolq.products.sinks.sink import LINEAGE_COLUMN, SYNC_COLUMNS, TENANT_COLUMN, RowKey, RowOwner

_Signature = tuple[str | None, str | None]  # (content_hash, vector_origin)
_Row = tuple[str, int, str | None, str | None, str | None, str | None]  # SYNC_COLUMNS, in order


@dataclass(frozen=True)
class SyncPlan:
    changed: frozenset[str]  # documents whose rows are written
    stale: frozenset[RowKey]  # stored rows deleted
    upserted: int  # rows written
    unchanged: int  # rows left alone
    foreign: frozenset[RowKey] = frozenset()  # keys of the job that another owner's rows hold, with other rows


def _by_document(rows: Iterable[_Row]) -> dict[str, dict[int, _Signature]]:
    documents: dict[str, dict[int, _Signature]] = defaultdict(dict)
    for record_id, chunk_index, digest, origin, _, _ in rows:
        documents[record_id][chunk_index] = (digest, origin)
    return documents


def _rows(table: pa.Table) -> list[_Row]:
    return list(zip(*(table.column(name).to_pylist() for name in SYNC_COLUMNS)))


def _owner_of(row: _Row, tenant: int, lineage: int) -> tuple[str | None, str | None]:
    """A stored row's (tenant, lineage): text, or None for a row written before rows had owners."""
    return (None if row[tenant] is None else str(row[tenant]), None if row[lineage] is None else str(row[lineage]))


def plan_sync(stored: pa.Table, current: pa.Table, owner: RowOwner, kept: frozenset[str] = frozenset()) -> SyncPlan:
    """``stored`` and ``current``: ``SYNC_COLUMNS`` of every row (the store's, the job's)."""
    tenant, lineage = SYNC_COLUMNS.index(TENANT_COLUMN), SYNC_COLUMNS.index(LINEAGE_COLUMN)
    everything = _rows(stored)
    in_store = _by_document(row for row in everything if owner.owns(*_owner_of(row, tenant, lineage)))
    in_job = _by_document(_rows(current))
    theirs = _by_document(row for row in everything if not owner.may_overwrite(*_owner_of(row, tenant, lineage))
                          and row[1] in in_job.get(row[0], {}))
    held = frozenset(doc for doc, rows in theirs.items() if rows == in_job[doc])
    foreign = frozenset((doc, index) for doc, rows in theirs.items() if doc not in held for index in rows)
    changed = frozenset(doc for doc, rows in in_job.items() if doc not in held and in_store.get(doc) != rows)
    gone = frozenset(doc for doc in in_store if doc not in in_job and doc not in kept)
    stale = frozenset((doc, index) for doc in changed | gone | held for index in in_store.get(doc, {})
                      if index not in in_job.get(doc, {}))
    return SyncPlan(
        changed=changed, stale=stale, foreign=foreign,
        upserted=sum(len(in_job[doc]) for doc in changed),
        unchanged=sum(len(rows) for doc, rows in in_job.items() if doc not in changed),
    )
