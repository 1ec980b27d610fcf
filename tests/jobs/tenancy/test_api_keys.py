"""API keys: created with enough randomness, stored hashed, checked in constant time, revocable,
and signed: a record written or edited in the bucket without the operator's secret is refused."""
import hashlib
import json
import logging
import re

import pytest

from poolq.jobs.tenancy.api_keys import ApiKeyStore, InvalidTenant
from poolq.jobs.tenancy.key_signature import SigningSecretMissing
from poolq.storage import LocalObjectStore

SECRET = "s" * 40


@pytest.fixture
def keys(tmp_path):
    return ApiKeyStore(LocalObjectStore(tmp_path), "jobs", signing_secret=SECRET, cache_s=0)


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


def _forge(tmp_path, key_id: str, fields: dict) -> None:
    """What anyone who can write one object of the bucket can do: put a key record of their own."""
    path = tmp_path / "jobs" / "_auth" / "keys" / f"{key_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fields))


def _record_fields(key_id: str, secret: str, tenant: str = "victim") -> dict:
    return {"key_id": key_id, "tenant": tenant, "scopes": ["jobs", "admin"],
            "secret_sha256": hashlib.sha256(secret.encode()).hexdigest(), "created_at": "2026-01-01T00:00:00+00:00",
            "name": "", "revoked_at": None}


def test_a_record_written_into_the_bucket_without_the_secret_is_refused_and_logged(keys, tmp_path, caplog):
    key_id, secret = "0123456789abcdef", "A" * 43
    _forge(tmp_path, key_id, _record_fields(key_id, secret))  # no tag at all
    with caplog.at_level(logging.WARNING, logger="poolq.jobs.tenancy.api_keys"):
        assert keys.authenticate(f"pq_{key_id}_{secret}") is None
    assert any(key_id in r.getMessage() and "no valid signature" in r.getMessage() for r in caplog.records)
    for tag in ("", "v1:" + "0" * 64, "nonsense"):  # a made-up tag is no better
        _forge(tmp_path, key_id, {**_record_fields(key_id, secret), "tag": tag})
        assert keys.authenticate(f"pq_{key_id}_{secret}") is None
    assert keys.list() == [] and keys.unsigned() == [key_id]


def test_an_edited_or_moved_signed_record_is_refused(keys, tmp_path):
    key, record = keys.create("acme")
    path = tmp_path / "jobs" / "_auth" / "keys" / f"{record.key_id}.json"
    signed = json.loads(path.read_text())
    assert signed["tag"].startswith("v1:")
    for edit in ({"tenant": "other"}, {"scopes": ["jobs", "admin"]}, {"revoked_at": None, "name": "x"}):
        path.write_text(json.dumps({**signed, **edit}))
        assert keys.authenticate(key) is None, edit
    path.write_text(json.dumps(signed))
    assert keys.authenticate(key).tenant == "acme"
    # The same signed record under another id: the id is signed too.
    other_id = "f" * 16
    _forge(tmp_path, other_id, {**signed, "key_id": signed["key_id"]})
    assert keys.authenticate(f"pq_{other_id}_{key.split('_', 2)[2]}") is None


def test_another_secret_signs_records_this_one_refuses_until_they_are_re_signed(tmp_path):
    old = ApiKeyStore(LocalObjectStore(tmp_path), "jobs", signing_secret="o" * 40, cache_s=0)
    key, record = old.create("acme", admin=True)
    new = ApiKeyStore(LocalObjectStore(tmp_path), "jobs", signing_secret="n" * 40, cache_s=0)
    assert new.authenticate(key) is None and new.unsigned() == [record.key_id]
    assert new.resign(record.key_id) == record  # the operator vouches for it
    assert new.authenticate(key).is_admin and new.unsigned() == []
    assert old.authenticate(key) is None  # a rotated-out secret no longer works
    assert new.resign("0" * 16) is None


def test_garbage_in_a_record_is_an_unknown_key_not_an_error(keys, tmp_path):
    key_id = "0123456789abcdef"
    for raw in ("{not json", "[1, 2]", json.dumps({"tag": "v1:00"})):
        path = tmp_path / "jobs" / "_auth" / "keys" / f"{key_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(raw)
        assert keys.authenticate(f"pq_{key_id}_{'A' * 43}") is None
        assert keys.resign(key_id) is None


@pytest.mark.parametrize("secret", [None, "", "short"])
def test_no_store_without_a_long_enough_secret(tmp_path, secret):
    with pytest.raises(SigningSecretMissing, match="POOLQ_KEY_SIGNING_SECRET"):
        ApiKeyStore(LocalObjectStore(tmp_path), "jobs", signing_secret=secret)
