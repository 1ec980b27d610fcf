"""Which address a request comes from, for the limits keyed on it (failed authentications).

The TCP peer, unless the peer is a proxy named in ``POOLQ_TRUSTED_PROXIES``: then the rightmost
``X-Forwarded-For`` hop that is not a trusted proxy (each proxy appends the address it was called
from, so hops left of the first untrusted one are whatever the client wrote). With the setting
empty (the default) the header is never read: any client could write it. The server is started
with uvicorn's own proxy handling off (``poolq serve``), so this is the only place that decides.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class TrustedProxies:
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, text: str) -> "TrustedProxies":
        """``"10.0.0.0/8, 192.168.1.7"`` -> the networks; ValueError naming an entry that is neither."""
        networks = []
        for entry in filter(None, (part.strip() for part in text.split(","))):
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ValueError(f"trusted proxy {entry!r} is not an IP address or CIDR network") from None
        return cls(tuple(networks))

    def trusts(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.networks)

    def client_address(self, peer: str, forwarded_for: list[str]) -> str:
        """The address a request stands for: ``peer``, or behind trusted proxies the rightmost
        untrusted hop of the ``X-Forwarded-For`` values (the leftmost hop if every one is trusted)."""
        if not self.trusts(peer):
            return peer
        hops = [hop.strip() for value in forwarded_for for hop in value.split(",") if hop.strip()]
        for hop in reversed(hops):
            if not self.trusts(hop):
                return hop
        return hops[0] if hops else peer


class TrustedProxyMiddleware:
    """Sets the request's client address (and, from a trusted proxy, its scheme from
    ``X-Forwarded-Proto``) as ``TrustedProxies`` decides; without trusted proxies it does nothing."""

    def __init__(self, app: ASGIApp, proxies: TrustedProxies) -> None:
        self.app = app
        self.proxies = proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client") if scope["type"] in ("http", "websocket") else None
        if self.proxies.networks and client and self.proxies.trusts(client[0]):
            headers = [(name.lower(), value.decode("latin-1")) for name, value in scope.get("headers", [])]
            forwarded = [value for name, value in headers if name == b"x-forwarded-for"]
            scope = {**scope, "client": (self.proxies.client_address(client[0], forwarded), client[1])}
            protos = [value.split(",")[-1].strip() for name, value in headers if name == b"x-forwarded-proto"]
            if protos and protos[-1] in ("http", "https"):
                scope["scheme"] = protos[-1] if scope["type"] == "http" else {"http": "ws", "https": "wss"}[protos[-1]]
        await self.app(scope, receive, send)
