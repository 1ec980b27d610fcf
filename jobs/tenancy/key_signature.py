"""API key records carry an HMAC-SHA256 tag made with a secret the bucket never holds.

Whoever can write one object of the bucket could otherwise mint an admin key for any tenant by
putting a record under ``_auth/keys/``. The tag covers the canonical record (its fields as
sorted, compact JSON, behind a label naming the record kind and the tag's version), so a record
without the server's secret is refused, and so is any edit of a signed one (a tenant, a scope,
a hash, a revocation time). The secret comes from the operator (``POOLQ_KEY_SIGNING_SECRET``);
see docs/reliability.md, "Threat model", for what this does not cover.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

#: Prefix of every tag: a new scheme gets a new version, and old tags stop verifying.
TAG_VERSION = "v1"
_LABEL = b"poolq api key record " + TAG_VERSION.encode() + b"\n"
#: A shorter secret is refused: the tag is only as strong as the secret is unguessable.
MIN_SECRET_CHARS = 32


class SigningSecretMissing(ValueError):
    """No usable key-signing secret is configured."""


@dataclass(frozen=True)
class KeySigner:
    """Tags and checks key records with one secret."""

    secret: bytes = field(repr=False)

    @classmethod
    def from_secret(cls, secret: str | None) -> KeySigner:
        if not secret or len(secret) < MIN_SECRET_CHARS:
            raise SigningSecretMissing(
                f"POOLQ_KEY_SIGNING_SECRET must be set to a random string of at least {MIN_SECRET_CHARS} characters "
                "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(48))'`); API key records are signed with it"
            )
        return cls(secret.encode())

    def tag(self, record: Mapping[str, object]) -> str:
        """The tag of ``record`` (its ``tag`` field, if any, left out)."""
        canonical = json.dumps(
            {k: v for k, v in record.items() if k != "tag"}, sort_keys=True, separators=(",", ":"), ensure_ascii=True
        )
        return f"{TAG_VERSION}:" + hmac.new(self.secret, _LABEL + canonical.encode(), hashlib.sha256).hexdigest()

    def verifies(self, record: Mapping[str, object]) -> bool:
        """Whether ``record`` holds a ``tag`` this secret made for exactly these fields."""
        presented = record.get("tag")
        return isinstance(presented, str) and hmac.compare_digest(presented, self.tag(record))
