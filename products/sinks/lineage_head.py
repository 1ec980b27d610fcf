"""Which run of a lineage a sink holds: the newest whose load was applied.

A lineage's runs load into one table, each making it hold exactly its own rows (``lineage.py``).
Loads do not always run in the order of the runs: a load retried with back-off while the store
was down, ``poolq sink retry`` of an old run, a schedule's runs that overlap (each continues the
last run that had finished when it started). An older run's load that came late would put its
older rows back. So each sink table keeps, per lineage, the run it holds (``sink-heads/<table>.json``
beside the lineage's first job, ``<table>`` a digest of where the table is, never its credentials:
a sink pointed at another table starts afresh): a load of a run submitted before it is not applied (the load ends
``skipped``, naming the newer run), and loads of one lineage into one sink run one at a time (a
lease on the lineage, renewed while the load works).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from urllib.parse import urlsplit

from poolq.jobs.coordination.leases import LeaseKeeper
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.sink_settings import SinkConfig
from poolq.products.sinks.sink import RowOwner
from poolq.storage import ObjectNotFoundError, join_key


class LineageBusy(Exception):
    """Another load of the lineage into the table runs: this one comes back once its lease lapses."""

    def __init__(self, message: str, expires_in_s: float | None) -> None:
        super().__init__(message)
        self.expires_in_s = expires_in_s


class LoadSuperseded(Exception):
    """A newer run of the lineage has loaded into the sink: this older run's rows are not applied."""


def _run_order(manifest: JobManifest) -> tuple[str, str]:
    """Runs in the order they were submitted (their input's age); the job id breaks a tie."""
    created = manifest.created_at.isoformat() if isinstance(manifest.created_at, datetime) else ""
    return created, manifest.job_id


def table_identity(config: SinkConfig) -> str:
    """Where a sink's table is (its store's address, path and table), as a digest: no credential."""
    url = urlsplit(config.url.get_secret_value())
    where = f"{url.scheme}://{url.hostname or ''}:{url.port or ''}{url.path}?{url.query}#{config.table}"
    return hashlib.sha256(where.encode("utf-8")).hexdigest()[:24]


class LineageHead:
    """The run of ``owner``'s lineage that sink ``name`` (configured as ``config``) holds."""

    def __init__(self, job: JobHandle, owner: RowOwner, name: str, config: SinkConfig) -> None:
        self.ctx, self.owner, self.name = job.ctx, owner, name
        self.table = table_identity(config)
        lineage_root = self.ctx.service_layout.job(owner.tenant, owner.lineage).root
        self.key = join_key(lineage_root, "sink-heads", f"{self.table}.json")

    @contextmanager
    def held(self) -> Iterator[None]:
        """One load of the lineage into this sink's table at a time; LineageBusy while another runs."""
        ttl = self.ctx.settings.reliability.lease_ttl_s
        unit = f"sink-head-{self.table}"
        lease = self.ctx.leases.acquire(self.owner.lineage, unit, ttl)
        if lease is None:
            raise LineageBusy(f"another load of lineage {self.owner.lineage} into sink {self.name!r} is running",
                              self.ctx.leases.expires_in(self.owner.lineage, unit))
        try:
            with LeaseKeeper(self.ctx.leases, lease, ttl):
                yield
        finally:
            self.ctx.leases.release(lease)

    def check(self, manifest: JobManifest) -> None:
        """LoadSuperseded if the sink holds a run of the lineage submitted after ``manifest``'s."""
        try:
            held = json.loads(self.ctx.store.get(self.key))
        except ObjectNotFoundError:
            return
        if (held["created_at"], held["job_id"]) > _run_order(manifest):
            raise LoadSuperseded(f"sink {self.name!r} holds job {held['job_id']}'s rows, a newer run of this job's "
                                 "lineage: this older run's rows are not loaded over them")

    def advance(self, manifest: JobManifest) -> None:
        created, job_id = _run_order(manifest)
        self.ctx.store.put(self.key, json.dumps({"job_id": job_id, "created_at": created}).encode())
