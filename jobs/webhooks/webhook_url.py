"""A webhook URL, parsed once: scheme, host, port and path, or a refusal saying what is wrong."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

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
    """``url`` parsed, or WebhookRefused: http(s) only, a host, no user name or password, no fragment."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
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
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return WebhookUrl(scheme, parts.hostname.lower().rstrip("."), port or DEFAULT_PORTS[scheme], path)
