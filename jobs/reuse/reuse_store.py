"""A tenant's stored outputs, in the bucket: immutable content-addressed Parquet objects and a
bounded index, all under the tenant's own prefix (``<service>/tenants/<tenant>/reuse/``).

- ``<scope>/objects/<t>-<sha>.parquet``: columns ``content_hash``, ``result`` (``result_codec``):
  the documents one shard computed; ``t`` (seconds since the epoch, 10 digits) dates it for the
  TTL, ``sha`` is the digest of its bytes, so a name never points at other bytes.
- ``<scope>/index/<pp>/<name>.parquet``: columns ``content_hash``, ``object`` for the hashes
  starting with the two hex digits ``pp``: 256 partitions, each looked up whole by the decide
  step's partition of the same digits. A partition of more than ``COMPACT_AT`` files is merged
  into one when it is read, so a lookup reads a bounded number of files.

Nothing here is shared between tenants: the prefix is the tenant's, and so is every hit.
"""
from __future__ import annotations

import hashlib
import io
import time
from collections import defaultdict
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from poolq.storage import ObjectNotFoundError, ObjectStore

COMPACT_AT = 16  # index files in one partition before a lookup merges them
PARTITION_DIGITS = 2  # 16**2 = 256 index partitions


def partition_of(content_hash: str) -> str:
    return content_hash[:PARTITION_DIGITS]


@dataclass(frozen=True)
class ReuseStats:
    objects: int
    bytes: int
    documents: int
    scopes: int

    def to_json(self) -> dict:
        return {"objects": self.objects, "bytes": self.bytes, "documents": self.documents, "scopes": self.scopes}


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _read(raw: bytes, columns: list[str] | None = None) -> pa.Table:
    return pq.read_table(io.BytesIO(raw), columns=columns)


def results_object(results: dict[str, bytes]) -> bytes:
    """One Parquet object of ``results`` (content hash -> encoded result)."""
    hashes = sorted(results)
    return _parquet(pa.table({"content_hash": pa.array(hashes, pa.string()),
                              "result": pa.array([results[name] for name in hashes], pa.binary())}))


def read_results(store: ObjectStore, key: str, content_hashes: set[str]) -> dict[str, bytes]:
    """The results of ``content_hashes`` the object at ``key`` holds (none if it is gone)."""
    if not content_hashes:
        return {}
    try:
        table = _read(store.get(key))
    except ObjectNotFoundError:
        return {}
    wanted = table.filter(pc.is_in(table.column("content_hash"), value_set=pa.array(sorted(content_hashes), pa.string())))
    return dict(zip(wanted.column("content_hash").to_pylist(), wanted.column("result").to_pylist()))


class ReuseStore:
    """One tenant's reuse area (``root``: its ``reuse`` prefix) in ``store``."""

    def __init__(self, store: ObjectStore, root: str) -> None:
        self.store, self.root = store, root.rstrip("/")

    def _scope(self, scope: str) -> str:
        return f"{self.root}/{scope}"

    def publish(self, scope: str, results: dict[str, bytes], now: float | None = None) -> str | None:
        """Store ``results`` (content hash -> encoded result) as one object and index it; its key."""
        if not results:
            return None
        hashes = sorted(results)
        body = results_object(results)
        name = f"{int(now if now is not None else time.time()):010d}-{hashlib.sha256(body).hexdigest()}.parquet"
        key = f"{self._scope(scope)}/objects/{name}"
        self.store.put(key, body)  # before the index names it: a lookup never finds a key with no object
        by_partition: dict[str, list[str]] = defaultdict(list)
        for content_hash in hashes:
            by_partition[partition_of(content_hash)].append(content_hash)
        for partition, members in by_partition.items():
            entries = pa.table({"content_hash": pa.array(members, pa.string()), "object": pa.array([key] * len(members))})
            self.store.put(f"{self._scope(scope)}/index/{partition}/{name}", _parquet(entries))
        return key

    def lookup(self, scope: str, partition: str) -> dict[str, str]:
        """Every stored content hash of ``partition`` under ``scope``, with the object holding it."""
        prefix = f"{self._scope(scope)}/index/{partition}/"
        keys = sorted(self.store.list(prefix))
        tables = []
        for key in keys:
            try:
                tables.append(_read(self.store.get(key)))
            except ObjectNotFoundError:
                continue  # merged or evicted meanwhile: its entries are in the merged file, or gone
        if not tables:
            return {}
        table = pa.concat_tables(tables)
        if len(keys) > COMPACT_AT:
            self._compact(prefix, keys, table)
        return dict(zip(table.column("content_hash").to_pylist(), table.column("object").to_pylist()))

    def _compact(self, prefix: str, keys: list[str], table: pa.Table) -> None:
        """Merge a partition's files into one (written first, then the merged ones deleted), leaving out
        entries whose object was evicted."""
        live = [key for key in pc.unique(table.column("object")).to_pylist() if self.store.exists(key)]
        body = _parquet(table.filter(pc.is_in(table.column("object"), value_set=pa.array(live, pa.string()))))
        self.store.put(f"{prefix}merged-{hashlib.sha256(body).hexdigest()}.parquet", body)
        for key in keys:
            self.store.delete(key)

    def holds(self, scope: str, object_key: str) -> bool:
        """Whether ``object_key`` is one of ``scope``'s objects (its engine identity and options)."""
        return object_key.startswith(f"{self._scope(scope)}/objects/")

    def read(self, object_key: str, content_hashes: set[str]) -> dict[str, bytes]:
        """The stored results of ``content_hashes`` in one object (those it still holds: an object
        evicted since it was indexed holds none, and those documents are computed again)."""
        return read_results(self.store, object_key, content_hashes)

    def objects(self) -> list[str]:
        return sorted(key for key in self.store.list(f"{self.root}/") if "/objects/" in key)

    def stats(self) -> ReuseStats:
        objects = self.objects()
        size = documents = 0
        for key in objects:
            size += self.store.stat(key).size
            documents += pq.ParquetFile(io.BytesIO(self.store.get(key))).metadata.num_rows
        scopes = {key[len(self.root) + 1:].split("/", 1)[0] for key in objects}
        return ReuseStats(objects=len(objects), bytes=size, documents=documents, scopes=len(scopes))

    def clear(self) -> int:
        """Delete everything stored; how many objects (index files included) were deleted."""
        keys = list(self.store.list(f"{self.root}/"))
        for key in keys:
            self.store.delete(key)
        return len(keys)

    def evict(self, ttl_s: float | None, quota_bytes: int | None, now: float | None = None) -> int:
        """Delete objects older than ``ttl_s``, then the oldest until the rest fit ``quota_bytes``;
        their index entries go with them. How many objects were deleted."""
        now = time.time() if now is None else now
        objects = self.objects()
        dated = sorted(objects, key=lambda key: key.rsplit("/", 1)[1])  # the name starts with its time
        doomed = [key for key in dated if ttl_s is not None and now - _written_at(key) > ttl_s]
        if quota_bytes is not None:
            kept = [key for key in dated if key not in set(doomed)]
            sizes = {key: self.store.stat(key).size for key in kept}
            total = sum(sizes.values())
            for key in kept:
                if total <= quota_bytes:
                    break
                doomed.append(key)
                total -= sizes[key]
        if doomed:
            self._delete_objects(doomed)
        return len(doomed)

    def _delete_objects(self, keys: list[str]) -> None:
        names = {key.rsplit("/", 1)[1] for key in keys}
        for key in keys:
            self.store.delete(key)
        for key in list(self.store.list(f"{self.root}/")):  # their index files; a merged file keeps stale
            if "/index/" in key and key.rsplit("/", 1)[1] in names:  # entries: read() then finds no object
                self.store.delete(key)


def _written_at(key: str) -> float:
    return float(key.rsplit("/", 1)[1].split("-", 1)[0])
