"""The sink step: after a job's manifest is written, load its rows into the sink it names.

Runs as its own task (``poolq.load_sinks``), never inside the finalizer: a slow or failing store
cannot hold the job back. The outcome is the manifest's ``sinks`` entry: ``pending`` (queued or
retried), ``succeeded`` with the rows ``upserted``, ``deleted`` and ``unchanged``, or ``failed``
with the error (the job's own state is untouched). ``poolq sink retry JOB`` queues a failed load
again; nothing is recomputed: the parts in the bucket are loaded again.

One load of a job runs at a time: it holds the job's ``sinks`` lease, renewed while it works. A
delivery that finds the lease held (a load running, or the lease of one whose worker was killed:
Celery delivers its task again at once) is sent again to come back once that lease lapses, so a
killed load is finished by its own task; the reconciler re-sends what is left pending past a lease
(``pending_loads.py``). A load writes and deletes only its lineage's rows (``lineage.py``):
it refuses to write a key that another job's rows hold.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime, timezone
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc

from poolq.jobs.coordination.leases import LeaseKeeper
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.manifest import JobManifest, ManifestSink
from poolq.jobs.settings import Settings
from poolq.jobs.spec.sink_config import SinkState
from poolq.products.sinks.configured_sinks import sink_config
from poolq.products.sinks.lineage import row_owner
from poolq.products.sinks.lineage_head import LineageBusy, LineageHead, LoadSuperseded
from poolq.products.sinks.pending_loads import SINK_UNIT, has_pending, note_sent, settle, settle_left_over
from poolq.products.sinks.sink import RowKey, RowOwner, SinkError, SinkLoad, SinkSchema, SinkUnavailable
from poolq.products.sinks.sink_entries import rewrite_sinks
from poolq.products.sinks.sink_factory import open_sink
from poolq.products.sinks.sink_outcome import record_sink_outcome
from poolq.products.sinks.sink_rows import require_hashes, sink_rows, sink_schema, vector_origin
from poolq.products.sinks.sync_plan import SyncPlan, plan_sync
from poolq.storage import ObjectNotFoundError, read_embeddings

log = logging.getLogger(__name__)

COME_BACK_AFTER_S = 1.0  # past the lapse of the lease a delivery found held
FOREIGN_KEYS_NAMED = 5  # keys a refused load's error names


def load_sinks(job: JobHandle) -> None:
    """Load the job's rows into each pending sink; SinkUnavailable (retryable) propagates."""
    manifest = job.ledger.manifest()
    if manifest is None:
        return
    if not has_pending(manifest):
        settle_left_over(job, manifest)  # sent again after its loads ended: its worker died before settling?
        return
    ttl = job.ctx.settings.reliability.lease_ttl_s
    lease = job.ctx.leases.acquire(job.id, SINK_UNIT, ttl)
    if lease is None:
        _come_back(job, job.ctx.leases.expires_in(job.id, SINK_UNIT), "its sink load's lease is held")
        return
    try:
        with LeaseKeeper(job.ctx.leases, lease, ttl):
            for entry in manifest.sinks or []:
                if entry.state == SinkState.PENDING:
                    manifest = _record(job, _load_outcome(job, manifest, entry.name)) or manifest
        settle(job)
    except LineageBusy as busy:  # the sink's entry stays pending: loaded when the other load is done
        _come_back(job, busy.expires_in_s, str(busy))
    finally:
        job.ctx.leases.release(lease)


def _come_back(job: JobHandle, remaining_s: float | None, why: str) -> None:
    """A lease is held: the job's (by a load that is running, which may end before loading a sink a
    retry has just marked pending, or by one whose worker was killed: nothing releases it), or its
    lineage's (another run's load into the same table). Either way this task is sent again to run
    once that lease lapses; its holder renews it while it runs, so a task that comes back too early
    comes back again."""
    countdown = max(remaining_s or 0.0, 0.0) + COME_BACK_AFTER_S
    note_sent(job)
    job.ctx.enqueuer.load_sinks(job.id, countdown_s=countdown)
    log.info("job %s: %s; the load comes back in %.1f s", job.id, why, countdown)


def _load_outcome(job: JobHandle, manifest: JobManifest, name: str) -> ManifestSink:
    """``load_into`` sink ``name``: succeeded, or skipped if a newer run of the lineage loaded; a sink
    error leaves with any configured URL or password masked (the worker logs what a task raises)."""
    try:
        plan = load_into(job, manifest, name, job.ctx.settings)
    except LoadSuperseded as superseded:
        return ManifestSink(name=name, state=SinkState.SKIPPED, error=str(superseded), finished_at=datetime.now(timezone.utc))
    except (SinkError, SinkUnavailable) as exc:
        raise type(exc)(scrub(str(exc), job.ctx.settings)) from None
    return ManifestSink(name=name, state=SinkState.SUCCEEDED, upserted=plan.upserted, deleted=len(plan.stale),
                        unchanged=plan.unchanged, finished_at=datetime.now(timezone.utc))


def fail_sinks(job: JobHandle, exc: BaseException) -> None:
    """Giving up: every pending sink of the job is failed, with the error (secrets masked)."""
    manifest = job.ledger.manifest()
    for entry in (manifest.sinks or []) if manifest else []:
        if entry.state == SinkState.PENDING:
            error = scrub(f"{type(exc).__name__}: {exc}", job.ctx.settings)
            log.warning("job %s: loading into sink %s failed: %s", job.id, entry.name, error)
            _record(job, ManifestSink(name=entry.name, state=SinkState.FAILED, error=error,
                                      finished_at=datetime.now(timezone.utc)))
    if manifest is not None:
        settle(job)


def load_into(job: JobHandle, manifest: JobManifest, name: str, settings: Settings) -> SyncPlan:
    """Make sink ``name`` (as ``settings`` configure it) hold exactly the job's rows among its lineage's
    (documents that failed this run keep theirs); SinkError, before writing anything, if another
    lineage's rows hold keys of the job; LoadSuperseded if the sink holds a newer run of the lineage
    (``lineage_head.py``)."""
    sink = open_sink(name, settings)
    try:
        parts = [part.key for part in manifest.parts]
        schema = _schema(job, manifest, parts)
        origin = vector_origin(manifest)
        owner = row_owner(job)
        head = LineageHead(job, owner, name, sink_config(name, settings))
        with head.held():
            head.check(manifest)
            current = _current_keys(job, parts, origin, owner)
            plan = plan_sync(sink.stored_keys(), current, owner, _failed_ids(job))
            if plan.foreign:
                raise SinkError(_foreign_keys_error(plan.foreign))
            rows = _changed_rows(job, parts, schema, origin, owner, plan.changed)
            sink.apply(SinkLoad(schema=schema, owner=owner, rows=rows, stale=plan.stale))
            head.advance(manifest)
        return plan
    finally:
        sink.close()


def _foreign_keys_error(keys: frozenset[RowKey]) -> str:
    named = ", ".join(f"{record_id!r} (chunk {index})" for record_id, index in sorted(keys)[:FOREIGN_KEYS_NAMED])
    more = f" and {len(keys) - FOREIGN_KEYS_NAMED} more" if len(keys) > FOREIGN_KEYS_NAMED else ""
    return (f"{len(keys)} rows of this job have keys that another job's rows hold in the sink's table: {named}{more}. "
            "A load never writes over or deletes another job's rows: give these documents other ids, load into "
            "another table, or continue that job (incremental_from)")


def _record(job: JobHandle, outcome: ManifestSink) -> JobManifest | None:
    manifest = job.ledger.manifest()
    sinks = [outcome if entry.name == outcome.name else entry for entry in (manifest.sinks or [])] if manifest else []
    updated = rewrite_sinks(job, sinks)
    record_sink_outcome(job, outcome)
    return updated


def _schema(job: JobHandle, manifest: JobManifest, parts: list[str]) -> SinkSchema:
    part_schema = read_embeddings(job.ctx.store.get(parts[0])).schema if parts else pa.schema([])
    return sink_schema(job.spec, part_schema, manifest.dimensions, _vocabulary_size(job))


def _vocabulary_size(job: JobHandle) -> int | None:
    """The model's vocabulary (sparsevec's dimensions), from its config.json."""
    try:
        config = json.loads((job.ctx.registry.description_dir(job.spec.model) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError):
        return None
    size = config.get("vocab_size")
    return size if isinstance(size, int) else None


def _current_keys(job: JobHandle, parts: list[str], origin: str, owner: RowOwner) -> pa.Table:
    """Every row's sync columns (``sink_rows`` without vectors), part by part."""
    tables = []
    for key in parts:
        keys = sink_rows(read_embeddings(job.ctx.store.get(key)), SinkSchema(), None, origin, owner)
        require_hashes(keys)
        tables.append(keys)
    return pa.concat_tables(tables) if tables else SinkSchema().arrow_schema().empty_table()


def _changed_rows(job: JobHandle, parts: list[str], schema: SinkSchema, origin: str, owner: RowOwner,
                  changed: frozenset[str]) -> Iterator[pa.Table]:
    """The rows of changed documents, one part at a time (never the whole job in memory)."""
    if not changed:
        return
    wanted = pa.array(sorted(changed), pa.string())
    codec = job.spec.output.codec(normalized=True)
    for key in parts:
        part = read_embeddings(job.ctx.store.get(key))
        part = part.filter(pc.is_in(part.column("id"), value_set=wanted))
        if part.num_rows:
            yield sink_rows(part, schema, codec, origin, owner)


def _failed_ids(job: JobHandle) -> frozenset[str]:
    """Documents whose records failed this run (the error file's ids): their earlier rows stay."""
    try:
        raw = job.ctx.store.get(job.layout.errors)
    except ObjectNotFoundError:
        return frozenset()
    ids = set()
    for line in raw.splitlines():
        record = json.loads(line) if line.strip() else {}
        if isinstance(record.get("id"), str):
            ids.add(record["id"])
    return frozenset(ids)


def scrub(message: str, settings: Settings) -> str:
    """``message`` without any configured sink's URL or password (a driver may quote them)."""
    for config in settings.vector_sinks.sinks.values():
        url = config.url.get_secret_value()
        password = urlsplit(url).password
        message = message.replace(url, "<sink url>")
        if password:
            message = message.replace(password, "***")
    return message

