"""Object keys: the one place that decides what a well-formed key is."""
from __future__ import annotations


class InvalidKeyError(ValueError):
    """A key that is empty, absolute, has empty, '.' or '..' segments, backslashes or control characters."""


def validate_key(key: str) -> str:
    """Return ``key`` if it is a safe relative key, else raise :class:`InvalidKeyError`."""
    if not key or key.startswith("/") or "\\" in key:
        raise InvalidKeyError(f"invalid object key {key!r}")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in key):
        raise InvalidKeyError(f"invalid object key {key!r}: control characters")
    if any(segment in ("", ".", "..") for segment in key.split("/")):
        raise InvalidKeyError(f"invalid object key {key!r}: empty, '.' or '..' segment")
    return key


def join_key(*parts: str) -> str:
    """Join key parts with '/', ignoring empty parts and stray slashes at the joins."""
    return "/".join(part.strip("/") for part in parts if part and part.strip("/"))
