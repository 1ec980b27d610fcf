"""The tenant reuse store's contract, on the local and the S3 object store: content-addressed
objects, a partitioned index that stays bounded, TTL and quota eviction, one tenant's prefix only."""
from poolq.jobs.reuse import reuse_store as module
from poolq.jobs.reuse.reuse_store import ReuseStore, partition_of

SCOPE = "s" * 64


def _hash(first: str, n: int) -> str:
    return f"{first}{n:063x}"[:64]


def test_published_results_are_found_by_partition_and_read_back(object_store):
    store = ReuseStore(object_store, "svc/tenants/acme/reuse")
    results = {_hash("a", 1): b"one", _hash("a", 2): b"two", _hash("b", 3): b"three"}
    key = store.publish(SCOPE, results, now=1_000)
    assert key.startswith(f"svc/tenants/acme/reuse/{SCOPE}/objects/0000001000-")
    found = store.lookup(SCOPE, partition_of(_hash("a", 1)))
    assert found == {_hash("a", 1): key, _hash("a", 2): key}
    assert store.lookup(SCOPE, partition_of(_hash("b", 3))) == {_hash("b", 3): key}
    assert store.lookup("other-scope", partition_of(_hash("a", 1))) == {}
    assert store.read(key, {_hash("a", 2), _hash("c", 9)}) == {_hash("a", 2): b"two"}
    assert store.stats().to_json() == {"objects": 1, "bytes": object_store.stat(key).size, "documents": 3, "scopes": 1}


def test_another_tenants_store_sees_nothing(object_store):
    mine = ReuseStore(object_store, "svc/tenants/acme/reuse")
    mine.publish(SCOPE, {_hash("a", 1): b"one"})
    theirs = ReuseStore(object_store, "svc/tenants/acme2/reuse")  # a prefix of the other's name, too
    assert theirs.lookup(SCOPE, "aa") == {} and theirs.stats().objects == 0
    assert theirs.clear() == 0 and mine.stats().objects == 1


def test_a_partition_of_many_files_is_merged_when_read(object_store, monkeypatch):
    monkeypatch.setattr(module, "COMPACT_AT", 3)
    store = ReuseStore(object_store, "svc/tenants/acme/reuse")
    keys = [store.publish(SCOPE, {_hash("c", n): bytes([n])}, now=1_000 + n) for n in range(5)]
    prefix = f"svc/tenants/acme/reuse/{SCOPE}/index/c0/"
    assert len(list(object_store.list(prefix))) == 5
    expected = {_hash("c", n): keys[n] for n in range(5)}
    assert store.lookup(SCOPE, "c0") == expected
    assert len(list(object_store.list(prefix))) == 1  # merged into one
    assert store.lookup(SCOPE, "c0") == expected


def test_ttl_and_quota_evict_the_oldest_objects_and_their_index_entries(object_store):
    store = ReuseStore(object_store, "svc/tenants/acme/reuse")
    old = store.publish(SCOPE, {_hash("d", 1): b"x" * 100}, now=1_000)
    middle = store.publish(SCOPE, {_hash("d", 2): b"y" * 100}, now=5_000)
    new = store.publish(SCOPE, {_hash("d", 3): b"z" * 100}, now=9_000)
    assert store.evict(ttl_s=6_000, quota_bytes=None, now=9_500) == 1  # older than 6,000 s
    assert store.read(old, {_hash("d", 1)}) == {} and set(store.lookup(SCOPE, "d0")) == {_hash("d", 2), _hash("d", 3)}
    quota = object_store.stat(new).size  # room for one object: the oldest left goes
    assert store.evict(ttl_s=None, quota_bytes=quota, now=9_500) == 1
    assert store.objects() == [new] and store.read(middle, {_hash("d", 2)}) == {}
    assert store.lookup(SCOPE, "d0") == {_hash("d", 3): new}


def test_clear_deletes_everything_of_the_tenant(object_store):
    store = ReuseStore(object_store, "svc/tenants/acme/reuse")
    store.publish(SCOPE, {_hash("e", 1): b"1", _hash("f", 2): b"2"})
    assert store.clear() == 3  # the object and two index files
    assert store.stats().objects == 0 and store.lookup(SCOPE, "e0") == {}
