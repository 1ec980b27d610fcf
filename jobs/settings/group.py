"""The base of every settings group: one concern's fields, read from the environment under the
names they have always had (``POOLQ_<FIELD>``), whichever group holds them."""
from __future__ import annotations

from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict

# Whose calls a client makes: the API's (a request waits on them: short deadlines) or a worker's,
# beat's or the CLI's (long parts stream through them: longer deadlines).
Role = Literal["api", "worker"]


class SettingsGroup(BaseSettings):
    """One concern's settings. A group reads its own fields from the environment (so a deployment's
    POOLQ_* variables load exactly as when Settings was one flat class); ``Settings`` holds one of each."""

    model_config = SettingsConfigDict(env_prefix="POOLQ_", extra="forbid")
