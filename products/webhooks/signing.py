"""Signing as the Standard Webhooks spec says (https://www.standardwebhooks.com/).

A secret is ``whsec_`` and base64 of random bytes (the HMAC key is the decoded bytes). The
signed content is ``{webhook-id}.{webhook-timestamp}.{body}``; ``webhook-signature`` carries
``v1,`` and base64 of its HMAC-SHA256, one per secret in effect, separated by spaces (while a
rotated-out secret still signs, a receiver holding either verifies).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
SIGNATURE_VERSION = "v1"
TOLERANCE_S = 300  # the spec's default: a receiver refuses timestamps further off than this


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key of ``secret`` (``whsec_`` optional); ValueError if it is not base64."""
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"a webhook secret is {SECRET_PREFIX} and base64: {exc}") from None


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``."""
    content = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), content, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def signed_headers(signing_secrets: Iterable[str], message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The request's headers: its id, time and one signature per secret."""
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(sign(secret, message_id, timestamp, body) for secret in signing_secrets),
    }


def verify(secret: str, headers: Mapping[str, str], body: bytes, now: float, tolerance_s: float = TOLERANCE_S) -> bool:
    """A receiver's check: a fresh timestamp and one ``v1`` signature made with ``secret``."""
    lower = {name.lower(): value for name, value in headers.items()}
    message_id, timestamp = lower.get("webhook-id", ""), lower.get("webhook-timestamp", "")
    if not message_id or not timestamp.isdigit() or abs(now - int(timestamp)) > tolerance_s:
        return False
    expected = sign(secret, message_id, int(timestamp), body)
    return any(hmac.compare_digest(expected, presented) for presented in lower.get("webhook-signature", "").split())
