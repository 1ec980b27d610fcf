"""Who may call the API and what they may reach: key records and their secret, proxies, input grants."""
from __future__ import annotations

from pydantic import Field, SecretStr

from poolq.jobs.settings.group import SettingsGroup


class AccessSettings(SettingsGroup):
    """Authentication at the API's edge (keys, failed attempts, proxies) and what a tenant's jobs may read."""

    api_key_cache_s: float = Field(5.0, ge=0, description="how long a key lookup (or revocation) is cached")
    # Operator secrets, never stored in the bucket (docs/reliability.md, "Threat model").
    key_signing_secret: SecretStr | None = Field(None, description="HMAC-SHA256 secret that signs API key records "
                                                 "(32+ characters): the API and `poolq keys` refuse to run without it")
    flower_basic_auth: SecretStr | None = Field(None, description="user:password (comma-separated pairs) that "
                                                "`poolq flower` asks for; it refuses to start without it")
    # Failed authentications per client address: guessing keys stops at the burst, then this rate.
    auth_failure_rate_per_s: float = Field(0.2, gt=0, description="invalid-key attempts per second per client address")
    auth_failure_burst: int = Field(20, ge=1)
    # Behind a load balancer (README): X-Forwarded-For is read only from these peers; empty, never.
    trusted_proxies: str = Field("", description="comma-separated addresses or CIDR networks of the proxies in front "
                                 "of the API; the client address (failed-authentication limit) is then the rightmost "
                                 "X-Forwarded-For hop that is not one of them")
    # tenant -> extra s3://bucket/prefix/ its jobs may read (its own uploads area is always allowed)
    tenant_input_prefixes: dict[str, list[str]] = Field(default_factory=dict)
    # file:// inputs: only for in-process runs on one's own machine (`poolq embed`), never the API.
    allow_file_inputs: bool = False
