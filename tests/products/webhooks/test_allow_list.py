"""POOLQ_WEBHOOK_ALLOW: what each entry matches, and entries that are not entries."""
import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolq.products.webhooks.allow_list import AllowList, AllowListInvalid
from poolq.products.webhooks.webhook_url import WebhookRefused


def _allowed(allow: str, url: str) -> bool:
    try:
        AllowList.parse(allow).entry_for(url)
    except WebhookRefused:
        return False
    return True


@pytest.mark.parametrize(("url", "allowed"), [
    ("https://hooks.example.com/x", True),
    ("https://hooks.example.com:443/x", True),  # the scheme's default port
    ("https://hooks.example.com:8443/x", False),  # another port
    ("http://hooks.example.com/x", False),  # another scheme
    ("https://evil-hooks.example.com/x", False),
    ("https://hooks.example.com.evil.net/x", False),
    ("https://a.b.example.org/", True),  # *.example.org: any name below it
    ("https://example.org/", False),  # ... not the name itself
    ("https://api.example.net/hooks", True),  # a path prefix: the path itself
    ("https://api.example.net/hooks/job?x=1", True),  # ... and below it
    ("https://api.example.net/hooksmith", False),
    ("https://api.example.net/", False),
    ("http://10.1.2.3:8080/in", True),
    ("http://[::1]:9000/", True),
])
def test_entries_match_scheme_host_port_and_path_prefix(url, allowed):
    allow = ("https://hooks.example.com, https://*.example.org, https://api.example.net/hooks/, "
             "http://10.1.2.3:8080, http://[::1]:9000")
    assert _allowed(allow, url) is allowed


def test_an_empty_list_accepts_no_webhook_and_says_so():
    with pytest.raises(WebhookRefused, match="accepts no webhooks"):
        AllowList.parse("").entry_for("https://hooks.example.com/")


@pytest.mark.parametrize("url", ["ftp://hooks.example.com/", "https://user:pw@hooks.example.com/",
                                 "https://hooks.example.com/#frag", "https:///nohost", "hooks.example.com"])
def test_urls_that_are_not_webhook_urls_are_refused(url):
    with pytest.raises(WebhookRefused):
        AllowList.parse("https://hooks.example.com").entry_for(url)


def test_private_flag_and_ip_literals_permit_non_public_addresses():
    named, flagged, literal = AllowList.parse("http://a.internal, http://b.internal private, http://10.0.0.7").entries
    loopback, ten = ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("10.0.0.7")
    assert not named.permits(loopback) and not named.permits(ten)
    assert flagged.permits(loopback) and flagged.permits(ten)
    assert not flagged.permits(ipaddress.ip_address("224.0.0.1"))  # multicast: never
    assert literal.permits(ten) and not literal.permits(ipaddress.ip_address("10.0.0.8"))


@pytest.mark.parametrize("entry", ["hooks.example.com", "https://hooks.example.com secret", "https://a.*.example.com",
                                   "https://hooks.example.com/?q=1", "gopher://x"])
def test_an_entry_that_is_not_one_is_an_operator_error(entry):
    with pytest.raises(AllowListInvalid, match="POOLQ_WEBHOOK_ALLOW entry"):
        AllowList.parse(entry)


@given(st.one_of(st.text(max_size=80), st.from_regex(r"https?://[^/]{0,20}(:[0-9a-z]{0,6})?/.{0,10}", fullmatch=True)))
@settings(max_examples=300, deadline=None)
def test_any_string_is_allowed_or_refused_with_a_reason_never_an_error(url):
    allow = AllowList.parse("https://hooks.example.com, http://*.example.org:8080/in, http://[fd00::1] private")
    try:
        parsed, entry = allow.entry_for(url)
    except WebhookRefused as exc:
        assert str(exc)
    else:
        assert entry.matches(parsed)
