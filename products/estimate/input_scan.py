"""The estimate's one streaming pass over a job's input: every record read once, as planning
reads it (same sections, same record checks), never held whole. It counts documents and
characters, the records planning would refuse (by code), distinct contents, and feeds the
sample. Past ``estimate_max_seconds`` it stops (inside a section where the share read is known,
else at its end) and says which part of the input's bytes it read, so the estimate can scale
what it saw."""
from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field

from poolq.jobs.context import JobContext
from poolq.jobs.inputs.input_format import InputFormat
from poolq.jobs.inputs.input_section import InputSection
from poolq.jobs.inputs.records import InputRecord, RecordError
from poolq.jobs.inputs.shard_input import InputFields
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.planning.input_objects import input_objects
from poolq.jobs.planning.sections import as_record, list_sections, section_records
from poolq.jobs.report.distinct_counter import DistinctCounter
from poolq.jobs.spec.job_spec import InlineInput, JobSpec
from poolq.products.estimate.stratified_sample import SampledDocument, StratifiedSample
from poolq.storage import JsonlObject, JsonlProgress

_DEADLINE_EVERY = 1000  # records between two looks at the clock inside a section


@dataclass
class InputScan:
    sample: StratifiedSample
    documents: int = 0  # valid records read
    characters: int = 0
    invalid: Counter[str] = field(default_factory=Counter)  # records planning would refuse, by code
    distinct: DistinctCounter = field(default_factory=DistinctCounter)  # contents
    ids: DistinctCounter = field(default_factory=DistinctCounter)  # ids: a repeated one is planning's duplicate_id
    # A superseding input (``input.supersede``) counts ids per object too: a repeat within an object is
    # a duplicate_id, of an earlier object's id a superseding. None for any other input.
    object_ids: DistinctCounter | None = None  # the object being read
    distinct_in_objects: int = 0  # summed over the objects read before it
    bytes_read: int = 0
    bytes_total: int = 0
    seconds: float = 0.0

    @property
    def fraction_read(self) -> float:
        return 1.0 if not self.bytes_total else min(1.0, self.bytes_read / self.bytes_total)

    def start_object(self) -> None:
        """A superseding input's next object: its ids are counted apart from here on."""
        if self.object_ids is not None:
            self.distinct_in_objects += self.object_ids.count().distinct
        self.object_ids = DistinctCounter()

    def id_repeats(self) -> tuple[int, int]:
        """Records planning leaves out for their id: (``duplicate_id`` failures, superseded records)."""
        distinct = self.ids.count().distinct
        if self.object_ids is None:
            return max(0, self.documents - distinct), 0
        # Each object keeps one record per id (its repeats fail); of those, every id's latest wins
        kept_per_object = self.distinct_in_objects + self.object_ids.count().distinct
        return max(0, self.documents - kept_per_object), max(0, kept_per_object - distinct)

    def count(self, record: InputRecord | RecordError) -> None:
        """One record as planning finds it: a valid one, or the error it is refused with."""
        if isinstance(record, RecordError):
            self.invalid[record.code] += 1
        else:
            self.add(record)

    def add(self, record: InputRecord) -> None:
        self.documents += 1
        self.characters += record.characters
        self.distinct.add(record.content_hash)
        id_hash = hashlib.sha256(record.id.encode("utf-8")).hexdigest()
        self.ids.add(id_hash)
        if self.object_ids is not None:
            self.object_ids.add(id_hash)
        spans = tuple((int(a), int(b)) for a, b in record.chunk_spans) if record.chunk_spans is not None else None
        self.sample.add(SampledDocument(record.text, record.content_hash, spans, record.query))


def scan_input(ctx: JobContext, spec: JobSpec, tenant: str) -> InputScan:
    settings = ctx.settings
    scan = InputScan(StratifiedSample(settings.estimates.estimate_sample_per_stratum, settings.estimates.estimate_sample_chars))
    started = time.monotonic()
    if isinstance(spec.input, InlineInput):
        fields, max_chars = InputFields.of(spec), settings.limits.max_document_chars
        for line, document in enumerate(spec.input.documents, start=1):  # as planning reads the stored lines
            scan.count(as_record(JsonlObject(line=line, value=document.as_row()), fields, max_chars))
    else:
        _scan_sections(scan, JobHandle.unsubmitted(ctx, spec, tenant), started + settings.estimates.estimate_max_seconds)
    scan.seconds = time.monotonic() - started
    return scan


def _scan_sections(scan: InputScan, job: JobHandle, deadline: float) -> None:
    fields = InputFields.of(job.spec)
    sections = list_sections(input_objects(job), fields, job.ctx.settings.sharding.plan_section_bytes)
    scan.bytes_total = sum(section.size_bytes for section in sections)
    previous = None
    for section in sections:
        if time.monotonic() > deadline and scan.bytes_read:
            return
        if job.spec.supersedes and section.uri != previous:  # an object's sections come one after another
            scan.start_object()
        previous = section.uri
        progress, records = JsonlProgress(), 0
        for _, record in section_records(job.ctx, section, fields, progress=progress):
            scan.count(record)
            records += 1
            if records % _DEADLINE_EVERY == 0 and time.monotonic() > deadline and _cuttable(section):
                scan.bytes_read += round(section.size_bytes * _fraction(section, progress, records))
                return
        scan.bytes_read += section.size_bytes


def _cuttable(section: InputSection) -> bool:
    """Whether the share of a section read so far is known: a plain JSONL range (bytes read) or a
    Parquet run (rows read); a gzip object's compressed size says nothing of it (read whole)."""
    return section.format == InputFormat.PARQUET.value or not section.uri.endswith(".gz")


def _fraction(section: InputSection, progress: JsonlProgress, records: int) -> float:
    if section.format == InputFormat.PARQUET.value:
        return min(1.0, records / max(1, section.end - section.start))
    return min(1.0, progress.bytes / max(1, section.end - section.start))
