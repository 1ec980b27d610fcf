"""Content-addressed reuse (docs/reuse.md): a tenant's stored outputs, and how long a shard waits
for the shard that computes a text it repeats (then it computes the text itself)."""
from __future__ import annotations

from pydantic import Field

from poolq.jobs.settings.group import SettingsGroup


class ReuseSettings(SettingsGroup):
    """Whether outputs are reused, how long and how much of them are kept, and the wait for a repeat."""

    reuse_enabled: bool = Field(True, description="false: every record is computed, repeats too (an operator's "
                                "switch, and the benchmark's baseline)")
    reuse_ttl_s: float | None = Field(30 * 86400, gt=0, description="a tenant's stored outputs are evicted this "
                                      "long after they were computed (None: kept until the quota needs room)")
    reuse_quota_bytes: int | None = Field(10 << 30, ge=0, description="a tenant's stored outputs beyond this are "
                                          "evicted, oldest first (None: no limit)")
    reuse_wait_s: float = Field(300.0, ge=0, description="a shard waits this long for the shard computing a text "
                                "it repeats before computing it itself")
    reuse_poll_s: float = Field(0.5, gt=0, description="how often a waiting shard looks for that shard's commit")
