"""The job's ledger in the object store: the only record of what happened that must survive.

Every decision that matters is a conditional write (``If-None-Match: *``): the spec, the plan,
one commit marker per shard (the attempt that wrote it first wins), the cancel request and the
manifest. Readers trust only what is written here.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from poolq.jobs.job import JobSpec
from poolq.jobs.ledger.layout import JobLayout, ShardObjectKind, parse_shard_object
from poolq.jobs.ledger.manifest import JobManifest
from poolq.storage import ObjectExistsError, ObjectNotFoundError, ObjectStore


@dataclass(frozen=True)
class CarriedPart:
    """Rows copied unchanged from an earlier run (incremental reindex), committed at planning."""

    key: str
    rows: int
    tokens: int = 0
    dimensions: int | None = None


@dataclass(frozen=True)
class Plan:
    num_shards: int
    total: int  # records read, valid or not
    plan_errors: int  # records rejected while planning (they are in plan-errors.jsonl)
    carried: tuple[CarriedPart, ...] = ()
    carried_records: int = 0
    engine: str | None = None  # the engine identity carried rows were made with (incremental runs)

    def to_json(self) -> dict:
        return {**asdict(self), "carried": [asdict(part) for part in self.carried]}

    @classmethod
    def from_json(cls, raw: dict) -> "Plan":
        carried = tuple(CarriedPart(**part) for part in raw.get("carried", ()))
        return cls(**{**raw, "carried": carried})


@dataclass(frozen=True)
class ShardCommit:
    """What one attempt of a shard produced. ``gave_up``: the shard crashed its worker too often."""

    attempt: str
    part_key: str | None
    errors_key: str
    rows: int  # Parquet rows (one per document, or one per chunk in the chunk modes)
    documents: int  # documents embedded
    errors: int  # records that failed (one error line each)
    tokens: int
    dimensions: int | None
    gave_up: bool = False
    engine: str | None = None  # JobContext.engine_identity of the worker that embedded it


def _dump(value: dict) -> bytes:
    # allow_nan=False: the ledger is JSON for every reader, so an infinity fails here instead of being written.
    return json.dumps(value, indent=2, sort_keys=True, allow_nan=False).encode("utf-8")


class JobLedger:
    """Reads and conditional writes of one job's ledger objects."""

    def __init__(self, store: ObjectStore, layout: JobLayout) -> None:
        self.store = store
        self.layout = layout

    def _put_once(self, key: str, value: dict) -> bool:
        """Write ``value`` unless ``key`` exists; True if this call wrote it."""
        try:
            self.store.put(key, _dump(value), if_absent=True)
        except ObjectExistsError:
            return False
        return True

    def _read_json(self, key: str) -> dict | None:
        try:
            return json.loads(self.store.get(key))
        except ObjectNotFoundError:
            return None

    def spec(self) -> JobSpec | None:
        raw = self._read_json(self.layout.spec)
        return None if raw is None else JobSpec.model_validate(raw)

    def write_plan(self, plan: Plan) -> bool:
        return self._put_once(self.layout.plan, plan.to_json())

    def plan(self) -> Plan | None:
        raw = self._read_json(self.layout.plan)
        return None if raw is None else Plan.from_json(raw)

    def commit(self, shard: int, commit: ShardCommit) -> bool:
        """Commit ``shard`` to this attempt's outputs; False if another attempt committed first."""
        return self._put_once(self.layout.shard_commit(shard), asdict(commit))

    def shard_commit(self, shard: int) -> ShardCommit | None:
        raw = self._read_json(self.layout.shard_commit(shard))
        return None if raw is None else ShardCommit(**raw)

    def committed_shards(self) -> set[int]:
        """The committed shards, from one listing of the work prefix (no marker is read)."""
        return set(self._commit_keys())

    def commits(self) -> dict[int, ShardCommit]:
        """Every committed shard with its marker (one read per shard: use ``committed_shards`` if
        only which shards are committed matters)."""
        return {shard: ShardCommit(**json.loads(self.store.get(key))) for shard, key in self._commit_keys().items()}

    def _commit_keys(self) -> dict[int, str]:
        objects = ((parse_shard_object(key), key) for key in self.store.list(self.layout.work_prefix))
        return {found.shard: key for found, key in objects if found and found.kind is ShardObjectKind.COMMIT}

    def request_cancel(self, reason: str = "cancelled by the user") -> None:
        self._put_once(self.layout.cancel, {"reason": reason})

    def cancel_requested(self) -> bool:
        return self.store.exists(self.layout.cancel)

    def write_manifest(self, manifest: JobManifest) -> bool:
        return self._put_once(self.layout.manifest, manifest.model_dump(mode="json"))

    def manifest_written(self) -> bool:
        """One cheap check (no read): has the job finished?"""
        return self.store.exists(self.layout.manifest)

    def manifest(self) -> JobManifest | None:
        raw = self._read_json(self.layout.manifest)
        return None if raw is None else JobManifest.model_validate(raw)
