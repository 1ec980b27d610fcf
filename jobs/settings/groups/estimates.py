"""Dry-run estimates (products/estimate/): a streaming pass over the input, a bounded sample tokenized."""
from __future__ import annotations

from pydantic import Field

from poolq.jobs.settings.group import SettingsGroup


class EstimateSettings(SettingsGroup):
    """How much of an input an estimate samples and reads, and how many run at once."""

    estimate_sample_per_stratum: int = Field(256, ge=1, description="estimates tokenize at most this many documents "
                                             "of each character-length bucket (a reservoir sample of it)")
    estimate_sample_chars: int = Field(16_000_000, ge=1000, description="characters an estimate's sample holds at most "
                                       "(all buckets together): its memory bound")
    estimate_max_seconds: float = Field(60.0, gt=0, description="an estimate reads the input this long at most; past "
                                        "it, what was read is extrapolated by bytes (the answer says how much)")
    estimate_concurrency: int = Field(2, ge=1, description="estimates computed at once by one API process (more wait)")
