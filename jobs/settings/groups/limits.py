"""What one request, input or tenant may use: sizes, rates, active jobs, token budgets."""
from __future__ import annotations

from pydantic import Field

from poolq.jobs.settings.group import SettingsGroup


class LimitSettings(SettingsGroup):
    """The API's limits and a tenant's quotas (docs/budgets.md); past one, a clear 413, 422 or 429."""

    max_request_bytes: int = Field(10 << 20, ge=1024, description="request bodies above this are refused (413)")
    max_document_chars: int = Field(2_000_000, ge=1, description="longest text accepted, inline or in an uploaded "
                                    "input (whose records are also bounded in bytes while read: docs/inputs-and-outputs.md)")
    max_input_compression_ratio: int = Field(100, ge=2, description="a gzip input expanding past this many times its "
                                             "compressed bytes (once past 256 MiB) stops being read: a decompression bomb")
    max_inline_documents: int = Field(1000, ge=1)
    max_file_bytes: int = Field(512 << 20, ge=1024, description="POST /v1/files (OpenAI batch inputs): larger "
                                "uploads are refused (413) as soon as they pass it")
    rate_limit_per_s: float = Field(20.0, gt=0, description="requests per second per tenant, sustained")
    rate_limit_burst: int = Field(60, ge=1)
    max_active_jobs_per_tenant: int = Field(20, ge=1)
    # Budgets (docs/budgets.md): tokens the model runs for a tenant, by job and by UTC day (reuse costs none).
    tenant_max_tokens_per_job: int | None = Field(None, ge=1, description="a job's limits.max_tokens when it sets "
                                                  "none, and the most one may set (more: 422); unset: no limit")
    tenant_max_tokens_per_day: int | None = Field(None, ge=1, description="tokens a tenant's jobs may run in one UTC "
                                                  "day; once reached, submissions get 429 with Retry-After until "
                                                  "midnight UTC; unset: no limit")
    budget_estimate_margin: float = Field(0.1, ge=0, lt=1, description="an input too large to price whole is refused "
                                          "at submit only when its estimate, less this share, still exceeds "
                                          "limits.max_tokens (the running job stops at the limit either way)")
