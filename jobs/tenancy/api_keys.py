"""API keys: one per caller, bound to a tenant, stored hashed in the object store.

A key reads ``pq_<key_id>_<secret>``: the id (64 bits) finds the record, the secret (256 bits
from ``secrets``) proves possession. Only the secret's SHA-256 is stored (a high-entropy
secret needs no slow hash), and it is compared in constant time. Keys are never logged.
Every record carries an HMAC tag made with the operator's secret (``key_signature.py``): a record
someone wrote straight into the bucket, or edited there, is refused like an unknown key, and
logged at WARNING.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from poolq.jobs.settings import Settings
from poolq.jobs.tenancy.key_signature import KeySigner
from poolq.storage import ObjectNotFoundError, ObjectStore, join_key

_log = logging.getLogger(__name__)

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
    """Key records under ``<prefix>/_auth/keys/<key_id>.json``, each signed with ``signing_secret``
    (``POOLQ_KEY_SIGNING_SECRET``); lookups cached for ``cache_s``."""

    def __init__(self, store: ObjectStore, prefix: str, *, signing_secret: str | None, cache_s: float = 5.0) -> None:
        self.store = store
        self.prefix = join_key(prefix, "_auth", "keys")
        self.cache_s = cache_s
        self._signer = KeySigner.from_secret(signing_secret)
        self._cache: dict[str, tuple[float, ApiKeyRecord | None]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, store: ObjectStore, settings: Settings, *, cache_s: float | None = None) -> ApiKeyStore:
        """The key store of a deployment: its output prefix, signing secret and cache time."""
        secret = settings.access.key_signing_secret.get_secret_value() if settings.access.key_signing_secret else None
        return cls(store, settings.storage.output_prefix, signing_secret=secret,
                   cache_s=settings.access.api_key_cache_s if cache_s is None else cache_s)

    def _key(self, key_id: str) -> str:
        return join_key(self.prefix, f"{key_id}.json")

    def _put(self, record: ApiKeyRecord, *, if_absent: bool = False) -> None:
        fields: dict = asdict(record)
        fields["tag"] = self._signer.tag(fields)
        self.store.put(self._key(record.key_id), json.dumps(fields).encode(), if_absent=if_absent)

    def create(self, tenant: str, *, admin: bool = False, name: str = "") -> tuple[str, ApiKeyRecord]:
        """A new key for ``tenant``; returns (the key, shown once, and its stored record)."""
        validate_tenant(tenant)
        key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        scopes = (SCOPE_JOBS, SCOPE_ADMIN) if admin else (SCOPE_JOBS,)
        record = ApiKeyRecord(key_id, tenant, scopes, _digest(secret), datetime.now(timezone.utc).isoformat(), name)
        self._put(record, if_absent=True)
        return f"{KEY_PREFIX}_{key_id}_{secret}", record

    def get(self, key_id: str) -> ApiKeyRecord | None:
        """The record of ``key_id`` if it exists and its tag is this secret's; None otherwise (a
        record without a valid tag is logged at WARNING: someone wrote it without the secret)."""
        fields = self._read(key_id)
        if fields is None:
            return None
        if not self._signer.verifies(fields):
            _log.warning("API key record %s rejected: no valid signature (written or edited without "
                         "POOLQ_KEY_SIGNING_SECRET)", self._key(key_id))
            return None
        return _parse(key_id, fields)

    def unsigned(self) -> list[str]:
        """Ids of records that exist but have no valid tag (refused by ``authenticate``)."""
        return [key_id for key_id in self._ids()
                if (fields := self._read(key_id)) is not None and not self._signer.verifies(fields)]

    def resign(self, key_id: str) -> ApiKeyRecord | None:
        """Sign the existing record of ``key_id`` with this secret, whatever tag it had: for records
        made before tags existed, or under a secret being rotated out. Only for records the operator
        knows to be theirs: this blesses whatever the record says."""
        fields = self._read(key_id)
        record = None if fields is None else _parse(key_id, fields)
        if record is None:
            return None
        self._put(record)
        self._forget(key_id)
        return record

    def revoke(self, key_id: str) -> ApiKeyRecord | None:
        record = self.get(key_id)
        if record is None or record.revoked_at:
            return record
        revoked = ApiKeyRecord(**{**asdict(record), "revoked_at": datetime.now(timezone.utc).isoformat()})
        self._put(revoked)
        self._forget(key_id)
        return revoked

    def authenticate(self, presented: str) -> Principal | None:
        """The principal for a presented key, or None (unknown, malformed, unsigned, revoked or wrong secret)."""
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

    def _ids(self) -> list[str]:
        return [key.rsplit("/", 1)[1].removesuffix(".json") for key in self.store.list(self.prefix + "/")]

    def _read(self, key_id: str) -> dict | None:
        """The stored fields of ``key_id``'s record, unchecked; None when absent or not a JSON object."""
        try:
            fields = json.loads(self.store.get(self._key(key_id)))
        except ObjectNotFoundError:
            return None
        except ValueError:
            _log.warning("API key record %s rejected: not JSON", self._key(key_id))
            return None
        return fields if isinstance(fields, dict) else None

    def _forget(self, key_id: str) -> None:
        with self._lock:
            self._cache.pop(key_id, None)

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

    # Last: below it, ``list`` in the class body names this method, not the builtin.
    def list(self) -> list[ApiKeyRecord]:
        """Every record with a valid tag."""
        return [record for key_id in self._ids() if (record := self.get(key_id)) is not None]


def _parse(key_id: str, fields: dict) -> ApiKeyRecord | None:
    """The record in ``fields`` if it is one, for ``key_id`` (a record copied under another id is not)."""
    record_fields = {k: v for k, v in fields.items() if k != "tag"}
    try:
        record = ApiKeyRecord(**{**record_fields, "scopes": tuple(record_fields["scopes"])})
    except (KeyError, TypeError):
        _log.warning("API key record of %s rejected: not a key record", key_id)
        return None
    return record if record.key_id == key_id else None
