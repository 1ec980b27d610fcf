"""Checking that a store honours conditional writes, which poolq's ledger relies on."""
from __future__ import annotations

import uuid

from poolq.storage.object_keys import join_key
from poolq.storage.object_store import ObjectExistsError, ObjectStore, StorageError


class ConditionalWritesUnsupported(StorageError):
    """The store accepted a second create-if-absent of the same key."""


def verify_conditional_writes(store: ObjectStore, probe_prefix: str) -> None:
    """Write a probe key twice with ``if_absent``; the second must be refused (HTTP 412).

    An S3-compatible server that ignores ``If-None-Match: *`` would let two attempts of a shard
    both "win" their commit; a worker must not run against it.
    """
    key = join_key(probe_prefix, f"conditional-write-probe-{uuid.uuid4().hex}")  # an empty prefix is fine
    store.put(key, b"first", if_absent=True)
    try:
        store.put(key, b"second", if_absent=True)
    except ObjectExistsError:
        return
    finally:
        store.delete(key)
    raise ConditionalWritesUnsupported(
        f"{store.uri(key)}: the store accepted a second conditional create (If-None-Match: *) of the same key; "
        "poolq's ledger needs conditional writes (AWS S3, MinIO and SeaweedFS support them)"
    )
