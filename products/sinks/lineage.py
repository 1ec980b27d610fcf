"""Whose rows a job's load writes (``RowOwner``): its tenant and its lineage.

A job's lineage is the first job of its ``incremental_from`` chain: a job that carries documents
from an earlier one continues its rows in the sink, deleting those of documents that are gone. A
schedule's runs are such a chain (each carries from the last good run), so a schedule is one
lineage. A job that continues nothing is a lineage of its own: it never deletes another job's rows.

Walking the chain reads one spec per job, so each load writes its job's lineage down
(``sink-lineage.json`` beside the manifest, written once) and the next job of the chain reads it
there: one read, however long the chain. A job of the chain that is no longer in the store ends
the walk (its id is the lineage)."""
from __future__ import annotations

import json

from poolq.jobs.job_handle import JobHandle
from poolq.products.sinks.sink import RowOwner
from poolq.storage import ObjectNotFoundError, join_key

LINEAGE_OBJECT = "sink-lineage.json"


def row_owner(job: JobHandle) -> RowOwner:
    """The owner of the rows ``job`` loads, written down for the jobs that continue it."""
    key = join_key(job.layout.root, LINEAGE_OBJECT)
    recorded = _recorded(job)
    if recorded is not None:
        return RowOwner(job.tenant, recorded)
    lineage = _walk(job)
    job.ctx.store.put_once(key, json.dumps({"lineage": lineage}).encode())
    return RowOwner(job.tenant, lineage)


def _recorded(job: JobHandle) -> str | None:
    try:
        return str(json.loads(job.ctx.store.get(join_key(job.layout.root, LINEAGE_OBJECT)))["lineage"])
    except ObjectNotFoundError:
        return None


def _walk(job: JobHandle) -> str:
    """The first job of ``job``'s chain, or the first whose lineage is written down. Chains only
    point back in time (a job names one that existed before it), so the walk ends; ``seen`` guards
    against a store edited by hand."""
    current, seen = job, {job.id}
    while True:
        spec = current.ledger.spec()
        parent = spec.incremental_from if spec is not None else None
        if parent is None or parent in seen:
            return current.id
        # submit_job only accepts an incremental_from of the same tenant.
        current = JobHandle.of_tenant(job.ctx, parent, job.tenant)
        seen.add(parent)
        recorded = _recorded(current)
        if recorded is not None:
            return recorded
