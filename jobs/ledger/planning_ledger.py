"""What each planning stage wrote: typed, written once (``If-None-Match: *``), read by the next.

A stage's record is written after its data objects, so it is the stage's commit point: a section
whose ``scan.json`` exists has its id spill; one whose ``cut.json`` exists has its shards and
error lines. Repeating a stage writes the same objects, so the first record written stands.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from enum import Enum

from poolq.jobs.inputs.input_section import InputSection, dump_sections, load_sections
from poolq.jobs.ledger.error_summary import ErrorSummary
from poolq.jobs.ledger.job_ledger import CarriedPart
from poolq.jobs.ledger.layout import JobLayout
from poolq.storage import ObjectNotFoundError, ObjectStore

# The objects a section's stages write under its key (PlanningLedger.section_key).
SPILL_NAME = "ids.tsv"  # scan: one line per valid record, in input order: id <TAB> content hash
GROUPS_NAME = "groups.tsv"  # scan, score jobs: one line per run of pairs sharing a query id: id <TAB> first <TAB> count
SKIPS_NAME = "skips.npz"  # decide: which records of the section are left out (duplicates, carried)
ERRORS_NAME = "errors.jsonl"  # cut: the section's rejected records


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


_STAGE_RECORD = re.compile(r"section-(\d{5,})\.(scan|cut)\.json")


class PlanningLedger:
    """Reads and once-only writes of one job's planning records."""

    def __init__(self, store: ObjectStore, layout: JobLayout) -> None:
        self.store = store
        self.layout = layout

    def _put_once(self, key: str, body: bytes) -> bytes:
        """Write ``body`` unless ``key`` exists; returns what is stored (this body or the first one)."""
        return body if self.store.put_once(key, body) else self.store.get(key)

    def _get(self, key: str) -> bytes | None:
        try:
            return self.store.get(key)
        except ObjectNotFoundError:
            return None

    def sections(self) -> list[InputSection] | None:
        raw = self._get(self.layout.planning_sections)
        return None if raw is None else load_sections(raw)

    def write_sections(self, sections: list[InputSection]) -> list[InputSection]:
        """Store the sections unless some are stored (the input may have changed since): returns the stored ones."""
        return load_sections(self._put_once(self.layout.planning_sections, dump_sections(sections)))

    def section_key(self, section: int, name: str) -> str:
        return self.layout.section_object(section, name)

    def stage_key(self, stage: SectionStage, section: int) -> str:
        return self.layout.stage_record(section, stage.value)

    def write_scan(self, section: int, scan: SectionScan) -> SectionScan:
        return SectionScan(**json.loads(self._put_once(self.stage_key(SectionStage.SCAN, section), _dump(scan))))

    def scan(self, section: int) -> SectionScan:
        return SectionScan(**json.loads(self.store.get(self.stage_key(SectionStage.SCAN, section))))

    def write_cut(self, section: int, cut: SectionCut) -> SectionCut:
        return SectionCut(**json.loads(self._put_once(self.stage_key(SectionStage.CUT, section), _dump(cut))))

    def cut(self, section: int) -> SectionCut:
        return SectionCut(**json.loads(self.store.get(self.stage_key(SectionStage.CUT, section))))

    def is_done(self, stage: SectionStage, section: int) -> bool:
        return self.store.exists(self.stage_key(stage, section))

    def done(self, stage: SectionStage) -> set[int]:
        """The sections whose ``stage`` is recorded, from one listing of the stage records."""
        found = set()
        for key in self.store.list(self.layout.planning_stages_prefix):
            match = _STAGE_RECORD.fullmatch(key.rsplit("/", 1)[-1])
            if match and match.group(2) == stage.value:
                found.add(int(match.group(1)))
        return found

    def write_decided(self, decided: Decided) -> Decided:
        return Decided.from_json(json.loads(self._put_once(self.layout.planning_decided, _dump(decided))))

    def decided(self) -> Decided | None:
        raw = self._get(self.layout.planning_decided)
        return None if raw is None else Decided.from_json(json.loads(raw))


def _dump(record: object) -> bytes:
    return json.dumps(asdict(record), sort_keys=True, allow_nan=False).encode("utf-8")  # type: ignore[call-overload]

