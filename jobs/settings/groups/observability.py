"""Operations: how logs are written, and who may read GET /metrics."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from poolq.jobs.settings.group import SettingsGroup


class ObservabilitySettings(SettingsGroup):
    """Log format, and whether /metrics (aggregates only, no tenant data) needs an admin key."""

    metrics_public: bool = True
    log_format: Literal["json", "text"] = Field("json", description="API and worker logs: one JSON object per line, or text")
