"""A webhook URL, parsed once: scheme, host, port and normalised path, or a refusal saying what is wrong.

The allow-list matches the parsed URL and the sender sends it: what was checked is what is sent."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from poolq.products.webhooks.url_path import UnsendableUrl, check_characters, checked_query, normalized_path

DEFAULT_PORTS = {"http": 80, "https": 443}
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebhookRefused(ValueError):
    """This URL (or the address it resolves to) may not receive webhooks; the message says why."""


@dataclass(frozen=True)
class WebhookUrl:
    scheme: str
    host: str  # lowercase, IPv6 literals without brackets
    port: int
    path: str  # the path and query the request asks for (at least "/")

    @property
    def literal(self) -> IPAddress | None:
        """The host as an IP address, if it is one."""
        return ip_literal(self.host)


def ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def parse_webhook_url(url: str) -> WebhookUrl:
    """``url`` parsed, or WebhookRefused: http(s) only, a host, no user name or password, no fragment,
    nothing a request cannot carry; its path normalised (``url_path.py``): the one matched and sent."""
    try:
        check_characters(url)
        parts = urlsplit(url)
        port = parts.port
    except UnsendableUrl as exc:
        raise WebhookRefused(str(exc)) from None
    except ValueError as exc:
        raise WebhookRefused(f"not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise WebhookRefused(f"the scheme must be http or https, not {parts.scheme or 'none'!r}")
    if not parts.hostname:
        raise WebhookRefused("the URL names no host")
    if parts.username is not None or parts.password is not None:
        raise WebhookRefused("the URL must not carry a user name or password")
    if parts.fragment:
        raise WebhookRefused("the URL must not carry a fragment (#...)")
    try:  # a URL with a host has an empty path or one starting with "/"
        path = normalized_path(parts.path or "/") + (f"?{checked_query(parts.query)}" if parts.query else "")
    except UnsendableUrl as exc:
        raise WebhookRefused(str(exc)) from None
    return WebhookUrl(scheme, parts.hostname.lower().rstrip("."), port or DEFAULT_PORTS[scheme], path)
