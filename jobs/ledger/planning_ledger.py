"""What each planning stage wrote: typed, written once (``If-None-Match: *``), read by the next.

A stage's record is written after its data objects (``planning_objects.py``), so it is the stage's
commit point: a section whose ``scan.json`` exists has its id spill; one whose ``cut.json`` exists
has its shards and error lines. Repeating a stage writes the same objects, so the first record
written stands.

Only the planning tasks (``jobs/steps/planner.py``, ``plan_section.py``, through ``planning_stages.py``) read and write records:
they read what a stage needs, run it (a plain function of those records), and write what it
returns. Since a record never changes once written, a ``PlanningLedger`` keeps each record it read
or wrote: a task reads each record at most once, however many stages need it. Which sections have
done a stage is asked of the bucket each time (``is_done``, ``done``, ``stages_done``): other tasks
add to it meanwhile.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Callable, TypeVar, cast

from poolq.jobs.inputs.input_section import InputSection, dump_sections, load_sections
from poolq.jobs.ledger.error_summary import ErrorSummary
from poolq.jobs.ledger.job_ledger import CarriedPart
from poolq.jobs.ledger.layout import JobLayout
from poolq.storage import ObjectNotFoundError, ObjectStore


class SectionStage(Enum):
    """The stages run once per section, each by its own task."""

    SCAN = "scan"
    CUT = "cut"


@dataclass(frozen=True)
class SectionScan:
    lines: int  # lines read, blank ones too: where the next section of the object starts counting
    valid: int  # valid records, spilled to ``ids.tsv`` in input order
    groups: int = 0  # score jobs: runs of consecutive pairs sharing a query id, spilled to ``groups.tsv``
    field_types: dict[str, str] = field(default_factory=dict)  # included fields: their schema types (Parquet), else first values


@dataclass(frozen=True)
class Decided:
    """What the partitions decided, for the cut stage and the plan."""

    first_lines: tuple[int, ...]  # each section's first line number in its object
    duplicates: int
    carried: tuple[CarriedPart, ...] = ()
    superseded: int = 0  # records left out for a later object's with the same id (input.supersede)
    carried_records: int = 0
    engine: str | None = None  # the engine identity carried rows were made with
    field_types: dict[str, str] = field(default_factory=dict)  # output.include_fields: each field's type, for the job

    @classmethod
    def from_json(cls, raw: dict) -> "Decided":
        return cls(**{**raw, "first_lines": tuple(raw["first_lines"]),
                      "carried": tuple(CarriedPart(**part) for part in raw["carried"])})


@dataclass(frozen=True)
class SectionCut:
    records: int  # non-blank lines, valid or not (superseded ones not counted)
    valid: int
    shards: int
    characters: int = 0  # of the records cut into shards (what the job's progress estimates tokens from)
    error_codes: dict[str, int] = field(default_factory=dict)  # error lines by code, duplicates included
    error_samples: list[str] = field(default_factory=list)  # the first messages

    @property
    def errors(self) -> int:
        return sum(self.error_codes.values())

    @property
    def errors_summary(self) -> ErrorSummary:
        return ErrorSummary(dict(self.error_codes), tuple(self.error_samples))


@dataclass(frozen=True)
class PlanningProgress:
    """How far a job's planning got, as one planning task finds it: read once, handed down."""

    done: dict[SectionStage, set[int]]  # for each stage, the sections that recorded it
    decided: Decided | None
    scans: list[SectionScan] | None  # every section's, in input order, when all are scanned and nothing is decided
    cuts: list[SectionCut] | None  # every section's, in input order, when all are cut

    @classmethod
    def nothing_done(cls) -> "PlanningProgress":
        return cls({stage: set() for stage in SectionStage}, None, None, None)


_STAGE_RECORD = re.compile(r"section-(\d{5,})\.(scan|cut)\.json")

_Record = TypeVar("_Record")


class PlanningLedger:
    """Reads and once-only writes of one job's planning records; each record read at most once."""

    def __init__(self, store: ObjectStore, layout: JobLayout) -> None:
        self.store = store
        self.layout = layout
        self._kept: dict[str, object] = {}  # key -> its record, parsed: written once, so never stale

    def _write_once(self, key: str, body: bytes, parse: Callable[[bytes], _Record]) -> _Record:
        """Write ``body`` unless ``key`` exists; returns what is stored (this body or the first one), kept."""
        stored = body if self.store.put_once(key, body) else self.store.get(key)
        self._kept[key] = record = parse(stored)
        return record

    def _read(self, key: str, parse: Callable[[bytes], _Record]) -> _Record:
        """The record at ``key``, read from the bucket the first time only (ObjectNotFoundError while unwritten)."""
        if key not in self._kept:
            self._kept[key] = parse(self.store.get(key))
        return cast(_Record, self._kept[key])

    def _read_if_written(self, key: str, parse: Callable[[bytes], _Record]) -> _Record | None:
        try:
            return self._read(key, parse)
        except ObjectNotFoundError:
            return None  # not kept: it may be written later

    def sections(self) -> list[InputSection] | None:
        return self._read_if_written(self.layout.planning_sections, load_sections)

    def write_sections(self, sections: list[InputSection]) -> list[InputSection]:
        """Store the sections unless some are stored (the input may have changed since): returns the stored ones."""
        return self._write_once(self.layout.planning_sections, dump_sections(sections), load_sections)

    def stage_key(self, stage: SectionStage, section: int) -> str:
        return self.layout.stage_record(section, stage.value)

    def write_scan(self, section: int, scan: SectionScan) -> SectionScan:
        return self._write_once(self.stage_key(SectionStage.SCAN, section), _dump(scan), _parse_scan)

    def scan(self, section: int) -> SectionScan:
        return self._read(self.stage_key(SectionStage.SCAN, section), _parse_scan)

    def write_cut(self, section: int, cut: SectionCut) -> SectionCut:
        return self._write_once(self.stage_key(SectionStage.CUT, section), _dump(cut), _parse_cut)

    def cut(self, section: int) -> SectionCut:
        return self._read(self.stage_key(SectionStage.CUT, section), _parse_cut)

    def is_done(self, stage: SectionStage, section: int) -> bool:
        return self.store.exists(self.stage_key(stage, section))

    def done(self, stage: SectionStage) -> set[int]:
        """The sections whose ``stage`` is recorded, from one listing of the stage records."""
        return self.stages_done()[stage]

    def stages_done(self) -> dict[SectionStage, set[int]]:
        """For each stage, the sections that have recorded it, from one listing of the stage records."""
        found: dict[SectionStage, set[int]] = {stage: set() for stage in SectionStage}
        for key in self.store.list(self.layout.planning_stages_prefix):
            match = _STAGE_RECORD.fullmatch(key.rsplit("/", 1)[-1])
            if match:
                found[SectionStage(match.group(2))].add(int(match.group(1)))
        return found

    def progress(self, sections: int) -> PlanningProgress:
        """What the planning recorded for a job of ``sections`` sections, from one listing of the
        stage records: the decided record, and the records of a stage every section has done, where
        the plan task needs them next (the scans to decide, the cuts to commit)."""
        done = self.stages_done()
        every = set(range(sections))
        if not done[SectionStage.SCAN] >= every:
            return PlanningProgress(done, None, None, None)  # nothing is decided before every section is scanned
        decided = self.decided()
        if decided is None:
            return PlanningProgress(done, None, [self.scan(index) for index in range(sections)], None)
        cuts = [self.cut(index) for index in range(sections)] if done[SectionStage.CUT] >= every else None
        return PlanningProgress(done, decided, None, cuts)

    def write_decided(self, decided: Decided) -> Decided:
        return self._write_once(self.layout.planning_decided, _dump(decided), _parse_decided)

    def decided(self) -> Decided | None:
        return self._read_if_written(self.layout.planning_decided, _parse_decided)


def _parse_scan(raw: bytes) -> SectionScan:
    return SectionScan(**json.loads(raw))


def _parse_cut(raw: bytes) -> SectionCut:
    return SectionCut(**json.loads(raw))


def _parse_decided(raw: bytes) -> Decided:
    return Decided.from_json(json.loads(raw))


def _dump(record: object) -> bytes:
    return json.dumps(asdict(record), sort_keys=True, allow_nan=False).encode("utf-8")  # type: ignore[call-overload]

