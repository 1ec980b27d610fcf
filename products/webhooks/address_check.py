"""Where a webhook may connect: the receiver's host resolved once, each address checked, one pinned.

The request then goes to the checked address (``http_post.py``), never to a second lookup of the
name: a DNS answer that changes between the check and the connection (rebinding) cannot move it
onto an internal address.
"""
from __future__ import annotations

import ipaddress
import socket
from typing import Callable

from poolq.products.webhooks.allow_list import AllowEntry
from poolq.products.webhooks.webhook_url import IPAddress, WebhookRefused, WebhookUrl

Resolver = Callable[[str, int], list[IPAddress]]


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (the system's resolver), IPv4-mapped IPv6 ones unwrapped."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [_unmapped(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])) for info in infos]  # "%": a zone


def _unmapped(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def non_public(address: IPAddress) -> str | None:
    """What kind of non-public address ``address`` is, or None if it is public (globally routable)."""
    address = _unmapped(address)
    kinds = (("loopback", address.is_loopback), ("link-local", address.is_link_local),
             ("multicast", address.is_multicast), ("unspecified", address.is_unspecified),
             ("private", address.is_private), ("reserved", address.is_reserved))
    for kind, matches in kinds:
        if matches:
            return kind
    return None if address.is_global else "non-global"


def check_address(url: WebhookUrl, entry: AllowEntry, address: IPAddress) -> None:
    """WebhookRefused unless ``address`` is public or ``entry`` permits it."""
    kind = non_public(address)
    if kind is not None and not entry.permits(_unmapped(address)):
        raise WebhookRefused(f"{url.host} is {address}, a {kind} address, and no allow-list entry permits it "
                             "(an IP-literal entry, or one marked 'private')")


def pinned_address(url: WebhookUrl, entry: AllowEntry, resolver: Resolver = resolve) -> IPAddress:
    """The address to connect to: the host's, once each address it resolves to passed
    ``check_address`` (one refused address refuses the host: a mixed answer is not trusted)."""
    if url.literal is not None:
        addresses = [_unmapped(url.literal)]
    else:
        try:
            addresses = resolver(url.host, url.port)
        except OSError as exc:
            raise ConnectionError(f"cannot resolve {url.host}: {exc}") from None
    if not addresses:
        raise ConnectionError(f"{url.host} resolves to no address")
    for address in addresses:
        check_address(url, entry, address)
    return addresses[0]
