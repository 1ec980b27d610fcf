"""Leases, the reconciler, poison shards, cooperative cancel, progress, and how long a finished job's state stays."""
from __future__ import annotations

from pydantic import Field

from poolq.jobs.settings.group import SettingsGroup


class ReliabilitySettings(SettingsGroup):
    """How a lost worker, a stuck unit or a stale upload is noticed and undone (docs/reliability.md)."""

    lease_ttl_s: float = Field(60.0, gt=0, description="a unit's lease lapses this long after its last renewal")
    reconcile_interval_s: float = Field(30.0, gt=0)
    requeue_after_s: float = Field(600.0, gt=0, description="re-send an unleased unit's task after this long")
    max_shard_crashes: int = Field(3, ge=1, description="a shard that crashed its worker this often fails")
    cancel_check_interval_s: float = Field(1.0, gt=0)
    progress_interval_s: float = Field(1.0, gt=0, description="a running shard reports the documents and tokens it "
                                       "has done at most this often (progress between commits)")
    stale_upload_s: float = Field(3600.0, gt=0, description="abort multipart uploads older than this")
    finished_job_ttl_s: float = Field(7 * 86400.0, gt=0, description="Redis state of a finished job expires after "
                                      "this; its status is then read back from the ledger")
