"""The operator's allow-list of webhook URLs (``POOLQ_WEBHOOK_ALLOW``).

Entries are separated by commas. Each is a URL prefix, ``scheme://host[:port][/path]``:

- ``scheme``: ``http`` or ``https``; the URL's must be the same.
- ``host``: a DNS name (that name only), ``*.`` and a name (any name below it, not the name
  itself), or an IP literal (IPv6 in brackets).
- ``port``: the URL's port; left out, the scheme's (443, 80).
- ``path``: left out or ``/``, any path; else the URL's path is it or goes on below it (``/hooks``
  matches ``/hooks`` and ``/hooks/a``, not ``/hooksmith``).

At delivery the host is resolved, and every address it resolves to must be public: private,
loopback, link-local, shared, reserved, multicast and unspecified addresses are refused. An
entry whose host is an IP literal permits that address, whatever it is; an entry followed by
`` private`` (``http://hooks.internal:8080 private``) permits non-public addresses (not
multicast or unspecified ones) for the URLs it matches. Empty: no webhook is accepted.
"""
from __future__ import annotations

from dataclasses import dataclass

from poolq.products.webhooks.webhook_url import IPAddress, WebhookRefused, WebhookUrl, ip_literal, parse_webhook_url

PRIVATE_FLAG = "private"


class AllowListInvalid(ValueError):
    """POOLQ_WEBHOOK_ALLOW holds an entry that is not one (an operator's mistake)."""


@dataclass(frozen=True)
class AllowEntry:
    scheme: str
    host: str
    port: int
    path: str  # "" for any path, else a prefix without a trailing "/"
    private: bool = False

    def matches(self, url: WebhookUrl) -> bool:
        if (url.scheme, url.port) != (self.scheme, self.port):
            return False
        if self.host.startswith("*."):
            host_ok = url.host.endswith(self.host[1:]) and len(url.host) > len(self.host) - 1
        else:
            host_ok = url.host == self.host or (self.literal is not None and url.literal == self.literal)
        path = url.path.split("?", 1)[0]
        return host_ok and (not self.path or path == self.path or path.startswith(self.path + "/"))

    @property
    def literal(self) -> IPAddress | None:
        return ip_literal(self.host)

    def permits(self, address: IPAddress) -> bool:
        """Whether this entry lets a URL it matches reach ``address`` though it is not public."""
        if self.literal is not None and address == self.literal:
            return True
        return self.private and not (address.is_multicast or address.is_unspecified)


@dataclass(frozen=True)
class AllowList:
    entries: tuple[AllowEntry, ...]

    @classmethod
    def parse(cls, text: str) -> AllowList:
        return cls(tuple(_entry(raw.strip()) for raw in text.split(",") if raw.strip()))

    def entry_for(self, url: str) -> tuple[WebhookUrl, AllowEntry]:
        """``url`` parsed and the first entry matching it; WebhookRefused if it is invalid or none does."""
        parsed = parse_webhook_url(url)
        if not self.entries:
            raise WebhookRefused("this server accepts no webhooks (its operator set no POOLQ_WEBHOOK_ALLOW)")
        for entry in self.entries:
            if entry.matches(parsed):
                return parsed, entry
        raise WebhookRefused(f"{parsed.scheme}://{parsed.host}:{parsed.port} with this path is not in the "
                             "server's webhook allow-list (POOLQ_WEBHOOK_ALLOW)")


def _entry(raw: str) -> AllowEntry:
    words = raw.split()
    if len(words) > 2 or (len(words) == 2 and words[1] != PRIVATE_FLAG):
        raise AllowListInvalid(f"POOLQ_WEBHOOK_ALLOW entry {raw!r}: a URL prefix, optionally followed by ' private'")
    try:
        url = parse_webhook_url(words[0])
    except WebhookRefused as exc:
        raise AllowListInvalid(f"POOLQ_WEBHOOK_ALLOW entry {raw!r}: {exc}") from None
    if "?" in url.path:
        raise AllowListInvalid(f"POOLQ_WEBHOOK_ALLOW entry {raw!r}: a prefix has no query")
    if "*" in url.host.removeprefix("*."):
        raise AllowListInvalid(f"POOLQ_WEBHOOK_ALLOW entry {raw!r}: '*' only as the host's first label ('*.example.com')")
    return AllowEntry(url.scheme, url.host, url.port, url.path.rstrip("/"), private=len(words) == 2)
