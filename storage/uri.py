"""``s3://bucket/key`` and ``file:///path`` URIs, and the store each one points into."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from poolq.storage.local_store import LocalObjectStore
from poolq.storage.object_keys import InvalidKeyError, validate_key
from poolq.storage.object_store import ObjectStore
from poolq.storage.s3_store import S3Config, S3ObjectStore, make_s3_client


class InvalidURIError(ValueError):
    """A URI that is not ``s3://bucket/key`` or ``file:///absolute/path``."""


@dataclass(frozen=True)
class ObjectURI:
    """A parsed URI: ``scheme`` is ``s3`` or ``file``; ``container`` is the bucket or directory."""

    scheme: str
    container: str
    key: str


def parse_uri(uri: str) -> ObjectURI:
    # urlparse silently deletes tab, CR and LF anywhere in a URL (WHATWG): refuse them (and every
    # other control character) here, so the key checked is the very string the caller sent.
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in uri):
        raise InvalidURIError(f"{uri!r}: control characters")
    parsed = urlparse(uri)
    if parsed.query or parsed.fragment or parsed.params:
        raise InvalidURIError(f"{uri!r}: a URI with '?', '#' or ';' parameters is not an object name")
    if parsed.scheme == "s3":
        key = parsed.path[1:]  # exactly one separator: "s3://b//k" names the absolute key "/k" (refused)
        if not parsed.netloc or not key:
            raise InvalidURIError(f"{uri!r}: expected s3://bucket/key")
        try:
            return ObjectURI("s3", parsed.netloc, validate_key(key))
        except InvalidKeyError as exc:
            raise InvalidURIError(f"{uri!r}: {exc}") from None
    if parsed.scheme == "file":
        path = Path(unquote(parsed.path))
        if parsed.netloc not in ("", "localhost") or not path.is_absolute() or path == Path("/"):
            raise InvalidURIError(f"{uri!r}: expected file:///absolute/path")
        return ObjectURI("file", str(path.parent), path.name)
    raise InvalidURIError(f"{uri!r}: only s3:// and file:// URIs are supported")


def open_uri(uri: str, s3_config: S3Config | None = None) -> tuple[ObjectStore, str]:
    """The store a URI points into and the key inside it."""
    target = parse_uri(uri)
    if target.scheme == "s3":
        config = s3_config or S3Config()
        return S3ObjectStore(make_s3_client(config), target.container, config), target.key
    return LocalObjectStore(target.container), target.key
