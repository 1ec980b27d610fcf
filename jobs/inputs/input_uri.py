"""Input URIs: one object, or a prefix naming every input object under it."""
from __future__ import annotations

from poolq.storage import ObjectURI, parse_uri


def is_prefix(uri: str) -> bool:
    """A URI that names every input object under it rather than one object."""
    return uri.endswith("/")


def parse_input_uri(uri: str) -> ObjectURI:
    """Parse an input URI, object or prefix (``InvalidURIError`` if it is neither)."""
    return parse_uri(uri.rstrip("/") if is_prefix(uri) else uri)
