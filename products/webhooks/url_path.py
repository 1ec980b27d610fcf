"""A webhook URL's characters and path, normalised once (RFC 3986) so that what the allow-list
matches is what is sent.

Only RFC 3986's characters are accepted (non-ASCII, spaces and control characters are
percent-encoded by the client, a host in its ``xn--`` form): http.client cannot send the others,
and ``urlsplit`` silently drops tabs and newlines, which would send another URL than the one
checked. The path is then normalised (section 6.2.2): percent-encoded unreserved characters
decoded (``%2e`` is ``.``), the other escapes' hex digits in upper case, dot segments removed
(section 5.2.4), so ``/hooks/../admin`` is matched, and sent, as ``/admin``. Refused outright: an
encoded ``/`` or ``\\`` (a server that decodes it sees other segments than the allow-list did), a
``..`` above the root, and a ``..;`` segment (which some servers read as ``..``).
"""
from __future__ import annotations

import re
import string

UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
# Every character a URI may hold (RFC 3986, section 2): unreserved, reserved ("gen-delims" and
# "sub-delims") and "%" of an escape.
URI_CHARACTERS = UNRESERVED | frozenset(":/?#[]@!$&'()*+,;=%")
_ESCAPE = re.compile(r"%(?P<hex>[0-9A-Fa-f]{2})?")
_ENCODED_SEPARATORS = frozenset("/\\")
_DOT_SEGMENTS = frozenset({".", ".."})


class UnsendableUrl(ValueError):
    """A URL that no request can carry, or whose path may mean another to the receiver."""


def check_characters(url: str) -> None:
    """UnsendableUrl naming the first character outside RFC 3986's, and where it is."""
    for position, char in enumerate(url):
        if char not in URI_CHARACTERS:
            escaped = "".join(f"%{byte:02X}" for byte in char.encode())
            host_form = "" if char.isascii() else "; a host in its xn-- form"
            raise UnsendableUrl(f"{char!r} at character {position + 1} cannot be sent in a URL: percent-encode it "
                                f"({escaped}{host_form})")


def normalized_path(path: str) -> str:
    """``path`` (starting with "/") with unreserved characters decoded and dot segments removed."""
    return _remove_dot_segments(_ESCAPE.sub(_decoded, path))


def checked_query(query: str) -> str:
    """``query`` as it is (a receiver reads it as it likes), once each '%' is an escape."""
    for escape in _ESCAPE.finditer(query):
        _require_hex(escape)
    return query


def _require_hex(escape: re.Match[str]) -> None:
    if escape.group("hex") is None:
        raise UnsendableUrl("a '%' not followed by two hex digits: write '%25' for a literal '%'")


def _decoded(escape: re.Match[str]) -> str:
    _require_hex(escape)
    char = chr(int(escape.group("hex"), 16))
    if char in _ENCODED_SEPARATORS:
        raise UnsendableUrl(f"an encoded '{char}' ({escape.group(0)}) in the path: a receiver may read it as a "
                            "separator the allow-list did not")
    return char if char in UNRESERVED else escape.group(0).upper()


def _remove_dot_segments(path: str) -> str:
    segments = path.split("/")[1:]
    kept: list[str] = []
    for segment in segments:
        if segment.split(";", 1)[0] in _DOT_SEGMENTS and segment not in _DOT_SEGMENTS:
            raise UnsendableUrl(f"a path segment {segment!r}: some servers read it as {segment.split(';', 1)[0]!r}")
        if segment == "..":
            if not kept:
                raise UnsendableUrl("the path's '..' climbs above its root")
            kept.pop()
        elif segment != ".":
            kept.append(segment)
    if segments[-1] in _DOT_SEGMENTS:
        kept.append("")  # "/a/b/.." is "/a/": a directory
    return "/" + "/".join(kept)
