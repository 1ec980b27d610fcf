"""The interactive lane (POST /v1/embeddings, docs/embeddings.md): a request is answered by a compute
worker between two steps of its batch work, or refused with 503 after the timeout."""
from __future__ import annotations

from pydantic import Field, model_validator

from poolq.jobs.settings.group import SettingsGroup


class LaneSettings(SettingsGroup):
    """How long a request waits for a worker, and how large and how many requests are taken."""

    embeddings_timeout_s: float = Field(20.0, gt=0, description="how long the API waits for a compute worker's "
                                        "answer; past it the request is dropped and the caller gets 503")
    embeddings_max_inputs: int = Field(2048, ge=1, description="inputs per request (OpenAI's limit); more: 413")
    embeddings_max_request_tokens: int | None = Field(
        None, ge=1, description="estimated tokens (characters / 4, or token ids) per request; more: 413 (one input "
        "over it alone: 400; the prompt counts before every input). Default: what a worker embeds in a quarter "
        "of embeddings_timeout_s")
    embeddings_max_waiting: int = Field(64, ge=1, description="requests one API process waits on at once (each "
                                        "holds a thread); more: 503 at once")
    embeddings_max_waiting_per_tenant: int | None = Field(
        None, ge=1, description="requests of one tenant one API process waits on at once; more: 429 at once, so one "
        "tenant never holds every waiting slot. Default: half of embeddings_max_waiting")

    @model_validator(mode="after")
    def _a_tenant_leaves_slots_to_others(self) -> "LaneSettings":
        share = self.embeddings_max_waiting_per_tenant
        if share is not None and self.embeddings_max_waiting > 1 and share >= self.embeddings_max_waiting:
            raise ValueError(f"embeddings_max_waiting_per_tenant ({share}) must be below embeddings_max_waiting "
                             f"({self.embeddings_max_waiting}): one tenant would hold every waiting slot")
        return self

    @property
    def waiting_per_tenant(self) -> int:
        return self.embeddings_max_waiting_per_tenant or max(1, self.embeddings_max_waiting // 2)
