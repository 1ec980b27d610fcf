"""The sinks an operator configures (docs/sinks/) and which tenants may load into each."""
from __future__ import annotations

from pydantic import Field

from poolq.jobs.settings.group import SettingsGroup
from poolq.jobs.sink_settings import SinkConfig


class SinkSettings(SettingsGroup):
    """Sinks by name (credentials stay here; jobs only name them) and each tenant's grants."""

    # name -> store URL (or {"url": ..., "table": ...})
    sinks: dict[str, SinkConfig] = Field(default_factory=dict)
    # tenant -> sink names its jobs and schedules may load into (none unless granted)
    sink_grants: dict[str, list[str]] = Field(default_factory=dict)
