"""API keys: one per caller, bound to a tenant, stored hashed in the object store.

A key reads ``pq_<key_id>_<secret>``: the id (64 bits) finds the record, the secret (256 bits
from ``secrets``) proves possession. Only the secret's SHA-256 is stored (a high-entropy
secret needs no slow hash), and it is compared in constant time. Keys are never logged.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from poolq.storage import ObjectNotFoundError, ObjectStore, join_key

KEY_PREFIX = "pq"
TENANT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_KEY_PATTERN = re.compile(r"^pq_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
SCOPE_JOBS = "jobs"
SCOPE_ADMIN = "admin"  # schedules and operations


class InvalidTenant(ValueError):
    pass


@dataclass(frozen=True)
class ApiKeyRecord:
    key_id: str
    tenant: str
    scopes: tuple[str, ...]
    secret_sha256: str
    created_at: str
    name: str = ""
    revoked_at: str | None = None

    @property
    def is_admin(self) -> bool:
        return SCOPE_ADMIN in self.scopes


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant every object they touch must belong to."""

    tenant: str
    key_id: str
    scopes: tuple[str, ...] = field(default=(SCOPE_JOBS,))

    @property
    def is_admin(self) -> bool:
        return SCOPE_ADMIN in self.scopes


def validate_tenant(tenant: str) -> str:
    if not TENANT_PATTERN.match(tenant):
        raise InvalidTenant(f"tenant {tenant!r}: use 1-63 lowercase letters, digits and '-', starting with a letter or digit")
    return tenant


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


class ApiKeyStore:
    """Key records under ``<prefix>/_auth/keys/<key_id>.json``; lookups cached for ``cache_s``."""

    def __init__(self, store: ObjectStore, prefix: str, cache_s: float = 5.0) -> None:
        self.store = store
        self.prefix = join_key(prefix, "_auth", "keys")
        self.cache_s = cache_s
        self._cache: dict[str, tuple[float, ApiKeyRecord | None]] = {}
        self._lock = threading.Lock()

    def _key(self, key_id: str) -> str:
        return join_key(self.prefix, f"{key_id}.json")

    def create(self, tenant: str, *, admin: bool = False, name: str = "") -> tuple[str, ApiKeyRecord]:
        """A new key for ``tenant``; returns (the key, shown once, and its stored record)."""
        validate_tenant(tenant)
        key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        scopes = (SCOPE_JOBS, SCOPE_ADMIN) if admin else (SCOPE_JOBS,)
        record = ApiKeyRecord(key_id, tenant, scopes, _digest(secret), datetime.now(timezone.utc).isoformat(), name)
        self.store.put(self._key(key_id), json.dumps(asdict(record)).encode(), if_absent=True)
        return f"{KEY_PREFIX}_{key_id}_{secret}", record

    def get(self, key_id: str) -> ApiKeyRecord | None:
        try:
            raw = json.loads(self.store.get(self._key(key_id)))
        except ObjectNotFoundError:
            return None
        return ApiKeyRecord(**{**raw, "scopes": tuple(raw["scopes"])})

    def list(self) -> list[ApiKeyRecord]:
        records = []
        for key in self.store.list(self.prefix + "/"):
            record = self.get(key.rsplit("/", 1)[1].removesuffix(".json"))
            if record is not None:
                records.append(record)
        return records

    def revoke(self, key_id: str) -> ApiKeyRecord | None:
        record = self.get(key_id)
        if record is None or record.revoked_at:
            return record
        revoked = ApiKeyRecord(**{**asdict(record), "revoked_at": datetime.now(timezone.utc).isoformat()})
        self.store.put(self._key(key_id), json.dumps(asdict(revoked)).encode())
        with self._lock:
            self._cache.pop(key_id, None)
        return revoked

    def authenticate(self, presented: str) -> Principal | None:
        """The principal for a presented key, or None (unknown, malformed, revoked or wrong secret)."""
        match = _KEY_PATTERN.match(presented)
        if match is None:
            return None
        key_id, secret = match.groups()
        record = self._cached(key_id)
        if record is None or record.revoked_at:
            return None
        if not hmac.compare_digest(_digest(secret), record.secret_sha256):
            return None
        return Principal(tenant=record.tenant, key_id=key_id, scopes=record.scopes)

    def _cached(self, key_id: str) -> ApiKeyRecord | None:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key_id)
            if hit is not None and hit[0] > now:
                return hit[1]
        record = self.get(key_id)
        with self._lock:
            self._cache[key_id] = (now + self.cache_s, record)
        return record
