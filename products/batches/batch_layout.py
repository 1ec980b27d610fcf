"""Where files and batches live in the store, per tenant: one place builds every key.

A batch's records are written once each (``batch.json`` at creation, ``prepared.json`` when its
input was read, ``cancel.json`` on a cancel, ``result.json`` when its files are written), so its
state is read back from which exist, never updated in place.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from poolq.jobs.ledger.layout import ServiceLayout
from poolq.jobs.spec.job_ids import new_job_id
from poolq.storage import join_key

FILE_ID = re.compile(r"^file-[0-9a-f]{32}$")
BATCH_ID = re.compile(r"^batch_[0-9a-f]{32}$")


def new_file_id() -> str:
    return f"file-{new_job_id()}"  # sorts by creation, like job ids


def new_batch_id() -> str:
    return f"batch_{new_job_id()}"


@dataclass(frozen=True)
class BatchLayout:
    """The keys of one tenant's files and batches under the service ``prefix``."""

    service: ServiceLayout
    tenant: str

    @property
    def _root(self) -> str:
        return self.service.tenant_key(self.tenant, "openai")

    @property
    def files_prefix(self) -> str:
        return join_key(self._root, "files") + "/"

    def file_record(self, file_id: str) -> str:
        return join_key(self._root, "files", f"{file_id}.json")

    def file_content(self, file_id: str) -> str:
        return join_key(self._root, "file-content", file_id)

    @property
    def batches_prefix(self) -> str:
        return join_key(self._root, "batches") + "/"

    def batch_record(self, batch_id: str, name: str) -> str:
        """``name``: batch.json, prepared.json, cancel.json, result.json, prepared-errors.jsonl,
        step-failures/<random>.json."""
        return join_key(self._root, "batches", batch_id, name)

    def job_input(self, batch_id: str) -> str:
        """The batch's requests as a poolq JSONL input, in the tenant's uploads area (which its jobs may read)."""
        return join_key(self.service.uploads_prefix(self.tenant), f"{batch_id}.jsonl")

    def expiry_marker(self, expires_at: int, file_id: str) -> str:
        """An empty marker per expiring file, named so that a listing returns them soonest first."""
        return join_key(expiring_files_prefix(self.service) + f"{expires_at:012d}", self.tenant, file_id)

    def active(self, batch_id: str) -> str:
        """An empty marker per unfinished batch: what the reconciler moves along."""
        return join_key(self.service.prefix, "_batches_active", self.tenant, batch_id)


def active_batches_prefix(service: ServiceLayout) -> str:
    return join_key(service.prefix, "_batches_active") + "/"


def expiring_files_prefix(service: ServiceLayout) -> str:
    return join_key(service.prefix, "_files_expiring") + "/"
