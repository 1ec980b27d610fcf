"""Which addresses a webhook may reach, and the address a delivery is pinned to."""
import ipaddress

import pytest

from poolq.products.webhooks.address_check import non_public, pinned_address, resolve
from poolq.products.webhooks.allow_list import AllowList
from poolq.products.webhooks.webhook_url import WebhookRefused


@pytest.mark.parametrize(("address", "kind"), [
    ("127.0.0.1", "loopback"), ("::1", "loopback"), ("10.1.2.3", "private"), ("192.168.0.1", "private"),
    ("172.16.5.4", "private"), ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("224.0.0.1", "multicast"), ("0.0.0.0", "unspecified"), ("100.64.0.1", "non-global"),
    ("::ffff:127.0.0.1", "loopback"), ("fd00::1", "private"), ("240.0.0.1", "private"),
    ("93.184.215.14", None), ("2606:4700::1111", None),
])
def test_non_public_kinds(address, kind):
    assert non_public(ipaddress.ip_address(address)) == kind


def _target(allow: str, url: str):
    return AllowList.parse(allow).entry_for(url)


def _answers(*addresses):
    return lambda host, port: [ipaddress.ip_address(a) for a in addresses]


def test_a_name_resolving_to_a_private_address_is_refused_unless_its_entry_permits_it():
    url, entry = _target("https://hooks.example.com", "https://hooks.example.com/x")
    with pytest.raises(WebhookRefused, match="10.0.0.5, a private address"):
        pinned_address(url, entry, _answers("10.0.0.5"))
    url, entry = _target("https://hooks.example.com private", "https://hooks.example.com/x")
    assert str(pinned_address(url, entry, _answers("10.0.0.5"))) == "10.0.0.5"


def test_one_non_public_address_among_public_ones_refuses_the_host():
    url, entry = _target("https://hooks.example.com", "https://hooks.example.com/x")
    with pytest.raises(WebhookRefused, match="169.254.169.254"):
        pinned_address(url, entry, _answers("93.184.215.14", "169.254.169.254"))


def test_the_address_is_the_first_checked_one_and_the_name_is_resolved_once():
    lookups = []

    def rebinding(host, port):  # a second lookup would answer loopback
        lookups.append(host)
        return [ipaddress.ip_address("93.184.215.14" if len(lookups) == 1 else "127.0.0.1")]

    url, entry = _target("https://hooks.example.com", "https://hooks.example.com/x")
    assert str(pinned_address(url, entry, rebinding)) == "93.184.215.14" and lookups == ["hooks.example.com"]


def test_localhost_really_resolves_to_loopback_and_is_refused_by_a_name_entry():
    url, entry = _target("http://localhost:8080", "http://localhost:8080/x")
    assert all(address.is_loopback for address in resolve("localhost", 8080))
    with pytest.raises(WebhookRefused, match="loopback"):
        pinned_address(url, entry)


def test_an_ip_literal_url_is_checked_without_a_lookup():
    url, entry = _target("http://127.0.0.1:9000", "http://127.0.0.1:9000/x")
    assert str(pinned_address(url, entry, _answers())) == "127.0.0.1"  # the resolver is never asked
    url, entry = _target("http://*.example.com:9000", "http://a.example.com:9000/x")
    with pytest.raises(ConnectionError, match="no address"):
        pinned_address(url, entry, _answers())
