"""Each tenant's webhook signing secret, under ``<prefix>/_auth/webhook_secrets/<tenant>.json``.

The workers sign with it, so it is stored as it is (workers hold no operator secret to unwrap it
with): whoever reads the bucket's ``_auth/`` area can read it, as they can read every job's
output. ``poolq webhooks secret`` shows it (making it on first use) and rotates it; after a
rotation the old secret still signs, beside the new one, for ``webhook_secret_overlap_s``.
"""
from __future__ import annotations

import time

from pydantic import BaseModel

from poolq.products.webhooks.signing import new_secret
from poolq.storage import ObjectNotFoundError, ObjectStore, join_key


class SecretVersion(BaseModel):
    secret: str
    created_at: float
    retired_at: float | None = None  # a rotated-out secret signs until this time


class TenantSecrets(BaseModel):
    tenant: str
    current: SecretVersion
    previous: SecretVersion | None = None

    def signing(self, now: float) -> list[str]:
        """The secrets that sign now: the current one, and a rotated-out one until it retires."""
        old = self.previous
        return [self.current.secret] + ([old.secret] if old and old.retired_at and now < old.retired_at else [])


class WebhookSecretStore:
    def __init__(self, store: ObjectStore, prefix: str) -> None:
        self.store = store
        self.prefix = join_key(prefix, "_auth", "webhook_secrets")

    def _key(self, tenant: str) -> str:
        return join_key(self.prefix, f"{tenant}.json")

    def get(self, tenant: str) -> TenantSecrets | None:
        try:
            return TenantSecrets.model_validate_json(self.store.get(self._key(tenant)))
        except ObjectNotFoundError:
            return None

    def ensure(self, tenant: str) -> TenantSecrets:
        """The tenant's secrets, made now if it has none (concurrent makers agree on the first)."""
        existing = self.get(tenant)
        if existing is not None:
            return existing
        made = TenantSecrets(tenant=tenant, current=SecretVersion(secret=new_secret(), created_at=time.time()))
        if self.store.put_once(self._key(tenant), made.model_dump_json().encode()):
            return made
        return self.get(tenant) or made

    def rotate(self, tenant: str, overlap_s: float) -> TenantSecrets:
        """A new current secret; the old one signs too for ``overlap_s`` more seconds."""
        now = time.time()
        old = self.ensure(tenant).current
        rotated = TenantSecrets(tenant=tenant, current=SecretVersion(secret=new_secret(), created_at=now),
                                previous=old.model_copy(update={"retired_at": now + overlap_s}))
        self.store.put(self._key(tenant), rotated.model_dump_json().encode())
        return rotated
