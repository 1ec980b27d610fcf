"""Which input URIs a tenant's job may read: its own uploads area, and prefixes granted to it.

Keys are validated by ``storage.parse_uri`` (no ``..``, ``//``, absolute keys, control
characters, query strings); here we decide ownership. No http(s) URL is ever fetched.
"""
from __future__ import annotations

from poolq.jobs.inputs.input_uri import is_prefix, parse_input_uri
from poolq.jobs.settings import Settings
from poolq.storage import InvalidURIError, join_key


class InputNotAllowed(ValueError):
    """The URI is well-formed but outside everything the tenant may read."""


def allowed_prefixes(tenant: str, settings: Settings) -> list[str]:
    """``s3://bucket/prefix/`` URIs the tenant's inputs may lie under (its uploads area first)."""
    uploads = "s3://" + join_key(settings.storage.bucket, settings.storage.output_prefix, "tenants", tenant, "uploads") + "/"
    granted = [uri if uri.endswith("/") else uri + "/" for uri in settings.access.tenant_input_prefixes.get(tenant, [])]
    return [uploads, *granted]


def check_input_access(uri: str, tenant: str, settings: Settings) -> None:
    """Raise ``InvalidURIError`` (malformed) or ``InputNotAllowed`` (not the tenant's)."""
    target = parse_input_uri(uri)
    if target.scheme == "file":
        if settings.access.allow_file_inputs:
            return
        raise InputNotAllowed("file:// inputs are only read by in-process runs; upload the file (POST /v1/uploads)")
    if target.scheme != "s3":  # pragma: no cover - parse_uri knows only s3 and file
        raise InvalidURIError(f"{uri!r}: unsupported scheme")
    normalized = f"s3://{target.container}/{target.key}" + ("/" if is_prefix(uri) else "")
    if not any(normalized.startswith(prefix) for prefix in allowed_prefixes(tenant, settings)):
        raise InputNotAllowed(
            f"{uri!r} is outside the locations tenant {tenant!r} may read; upload it (POST /v1/uploads) "
            f"or ask an operator to grant its bucket/prefix"
        )
