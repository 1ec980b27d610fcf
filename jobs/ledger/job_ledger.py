"""The job's ledger in the object store: the only record of what happened that must survive.

Every decision that matters is a conditional write (``If-None-Match: *``): the spec, the plan,
one commit marker per shard (the attempt that wrote it first wins), the cancel request and the
manifest. Readers trust only what is written here.
"""
from __future__ import annotations

import bisect
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import accumulate

from poolq.jobs.ledger.error_summary import ErrorSummary
from poolq.jobs.ledger.layout import JobLayout, ShardObjectKind, parse_shard_object
from poolq.jobs.ledger.manifest import JobManifest, ManifestSink
from poolq.jobs.spec.job_spec import JobSpec
from poolq.storage import ObjectNotFoundError, ObjectStore

_READERS = 16  # commit markers read concurrently by the finalizer (S3 GETs are latency-bound)


@dataclass(frozen=True)
class CarriedPart:
    """Rows copied unchanged from an earlier run (incremental reindex), committed at planning."""

    key: str
    rows: int
    tokens: int = 0
    dimensions: int | None = None


@dataclass(frozen=True)
class Plan:
    """What planning decided. Shards are numbered across the input's sections in order: section 0's
    ``section_shards[0]`` shards first (``jobs/planning/``)."""

    total: int  # records read, valid or not
    plan_errors: int  # records rejected while planning (they are in plan-errors.jsonl)
    section_shards: tuple[int, ...] = ()  # shards cut from each section of the input
    carried: tuple[CarriedPart, ...] = ()
    carried_records: int = 0
    engine: str | None = None  # the engine identity carried rows were made with (incremental runs)
    superseded: int = 0  # records replaced by a later object's with the same id (input.supersede): not in total
    error_codes: dict[str, int] = field(default_factory=dict)  # the plan errors by code
    error_samples: list[str] = field(default_factory=list)  # and their first messages
    field_types: dict[str, str] = field(default_factory=dict)  # output.include_fields: each column's type
    characters: int = 0  # of the records cut into shards (the job's progress estimates tokens from them)

    @property
    def errors_summary(self) -> ErrorSummary:
        return ErrorSummary(dict(self.error_codes), tuple(self.error_samples))

    @property
    def num_shards(self) -> int:
        return sum(self.section_shards)

    def shard_location(self, shard: int) -> tuple[int, int]:
        """``(section, n)``: the job's ``shard`` is the ``n``-th shard cut from that section."""
        if not 0 <= shard < self.num_shards:
            raise ValueError(f"shard {shard} is not one of the plan's {self.num_shards}")
        ends = list(accumulate(self.section_shards))
        section = bisect.bisect_right(ends, shard)
        return section, shard - (ends[section] - self.section_shards[section])

    def to_json(self) -> dict:
        return {**asdict(self), "carried": [asdict(part) for part in self.carried],
                "section_shards": list(self.section_shards), "num_shards": self.num_shards}

    @classmethod
    def from_json(cls, raw: dict) -> "Plan":
        fields = {name: value for name, value in raw.items() if name != "num_shards"}  # num_shards: for readers
        carried = tuple(CarriedPart(**part) for part in raw.get("carried", ()))
        return cls(**{**fields, "carried": carried, "section_shards": tuple(raw.get("section_shards", ()))})


@dataclass(frozen=True)
class ShardCommit:
    """What one attempt of a shard produced. ``gave_up``: the shard crashed its worker too often."""

    attempt: str
    part_key: str | None
    errors_key: str
    rows: int  # Parquet rows (one per document, or one per chunk in the chunk modes)
    documents: int  # documents embedded
    errors: int  # records that failed (one error line each, not_processed ones included)
    tokens: int
    dimensions: int | None
    gave_up: bool = False
    not_processed: int = 0  # of ``errors``: records a cancel stopped before they were embedded
    characters: int = 0  # of the records embedded or failed (not_processed ones left out)
    engine: str | None = None  # JobContext.engine_identity of the worker that embedded it
    error_codes: dict[str, int] = field(default_factory=dict)  # its errors by code
    error_samples: list[str] = field(default_factory=list)  # and their first messages
    reused_documents: int = 0  # of ``documents``: copied from an earlier computation of their text (docs/reuse.md)
    reused_tokens: int = 0  # the tokens those copies would have cost; ``tokens`` counts what was computed
    engine_identity: dict | None = None  # EngineIdentity of the engine that embedded it, in full

    @property
    def errors_summary(self) -> ErrorSummary:
        return ErrorSummary(dict(self.error_codes), tuple(self.error_samples))


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
        return self.store.put_once(key, _dump(value))

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
        """Every committed shard with its marker (one read per shard, ``_READERS`` at a time: use
        ``committed_shards`` if only which shards are committed matters)."""
        keys = self._commit_keys()
        with ThreadPoolExecutor(max_workers=_READERS) as pool:
            markers = pool.map(lambda key: ShardCommit(**json.loads(self.store.get(key))), keys.values())
            return dict(zip(keys, markers))

    def _commit_keys(self) -> dict[int, str]:
        objects = ((parse_shard_object(key), key) for key in self.store.list(self.layout.work_prefix))
        return {found.shard: key for found, key in objects if found and found.kind is ShardObjectKind.COMMIT}

    def request_cancel(self, reason: str = "cancelled by the user") -> None:
        self._put_once(self.layout.cancel, {"reason": reason})

    def cancel_requested(self) -> bool:
        return self.store.exists(self.layout.cancel)

    def cancel_reason(self) -> str | None:
        """Why the job was asked to stop (the first request's reason), or None if it was not."""
        raw = self._read_json(self.layout.cancel)
        return None if raw is None else str(raw.get("reason", ""))

    def write_manifest(self, manifest: JobManifest) -> bool:
        return self._put_once(self.layout.manifest, manifest.model_dump(mode="json"))

    def manifest_written(self) -> bool:
        """One cheap check (no read): has the job finished?"""
        return self.store.exists(self.layout.manifest)

    def manifest(self) -> JobManifest | None:
        raw = self._read_json(self.layout.manifest)
        return None if raw is None else JobManifest.model_validate(raw)

    def rewrite_manifest_sinks(self, sinks: list[ManifestSink]) -> JobManifest | None:
        """Replace the written manifest's ``sinks`` (a sink load's progress; everything else stays
        as the finalizer wrote it). None if the job has no manifest yet. One sink step runs per job
        at a time (its lease), so this read-modify-write has no concurrent writer."""
        manifest = self.manifest()
        if manifest is None:
            return None
        updated = manifest.model_copy(update={"sinks": sinks})
        self.store.put(self.layout.manifest, _dump(updated.model_dump(mode="json")))
        return updated
