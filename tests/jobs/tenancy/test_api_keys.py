"""API keys: created with enough randomness, stored hashed, checked in constant time, revocable."""
import json
import re

import pytest

from poolq.jobs.tenancy.api_keys import ApiKeyStore, InvalidTenant
from poolq.storage import LocalObjectStore


@pytest.fixture
def keys(tmp_path):
    return ApiKeyStore(LocalObjectStore(tmp_path), "jobs", cache_s=0)


def test_a_created_key_authenticates_as_its_tenant_and_is_stored_only_hashed(keys, tmp_path):
    key, record = keys.create("acme", name="ci")
    assert re.fullmatch(r"pq_[0-9a-f]{16}_[A-Za-z0-9_-]{43}", key)  # 256-bit secret
    principal = keys.authenticate(key)
    assert (principal.tenant, principal.key_id, principal.is_admin) == ("acme", record.key_id, False)
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*.json"))
    secret = key.split("_", 2)[2]  # pq_<key id>_<secret>: the secret itself may hold "_"
    assert secret.encode() not in stored and json.loads(stored)["secret_sha256"] == record.secret_sha256


def test_wrong_malformed_unknown_and_revoked_keys_are_refused(keys):
    key, record = keys.create("acme", admin=True)
    assert keys.authenticate(key).is_admin
    tampered = key[:-1] + ("A" if key[-1] != "A" else "B")
    assert keys.authenticate(tampered) is None
    assert keys.authenticate("pq_0123456789abcdef_" + "x" * 43) is None  # unknown id
    assert keys.authenticate("Bearer nonsense") is None
    keys.revoke(record.key_id)
    assert keys.authenticate(key) is None
    assert [r.revoked_at is not None for r in keys.list()] == [True]


def test_keys_are_unique_and_tenants_validated(keys):
    assert len({keys.create("t1")[0] for _ in range(20)}) == 20
    for bad in ("", "UPPER", "../x", "a/b", "-lead", "x" * 64):
        with pytest.raises(InvalidTenant):
            keys.create(bad)
