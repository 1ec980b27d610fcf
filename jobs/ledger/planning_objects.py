"""A job's planning data objects: the bulk each planning stage writes, by section and name.

A stage writes its data objects first and its record (``planning_ledger.py``) last: the record is
the commit point, these are what it commits. The next stages stream them back (a section's id
spill holds ~40 bytes per document), and the finished job deletes the largest (``cleanup.py``).
Every stage reaches them through one ``PlanningObjects``: where a section's object lives is said here alone.
"""
from __future__ import annotations

from typing import BinaryIO, Iterable

from poolq.jobs.ledger.layout import JobLayout
from poolq.storage import ObjectStore

# The objects a section's stages write (``planning/section-00007.<name>``)
# scan: one line per valid record, in input order: id <TAB> content hash <TAB> line, then <TAB> carry
# key for a job carrying fields (planning/carry_key.py)
SPILL_NAME = "ids.tsv"
GROUPS_NAME = "groups.tsv"  # scan, score jobs: one line per run of pairs sharing a query id: id <TAB> first <TAB> count
SKIPS_NAME = "skips.npz"  # decide: which records of the section are left out (duplicates, carried)
ERRORS_NAME = "errors.jsonl"  # cut: the section's rejected records
REUSE_TABLE_NAME = "reuse.parquet"  # decide: the reuse decisions for the section's records (jobs/reuse/)


class PlanningObjects:
    """Reads and writes of one job's section objects (never of its records: the planner's ledger keeps those)."""

    def __init__(self, store: ObjectStore, layout: JobLayout) -> None:
        self.store = store
        self.layout = layout

    def key(self, section: int, name: str) -> str:
        return self.layout.section_object(section, name)

    def put(self, section: int, name: str, body: bytes) -> None:
        self.store.put(self.key(section, name), body)

    def put_chunks(self, section: int, name: str, chunks: Iterable[bytes]) -> None:
        self.store.put_chunks(self.key(section, name), chunks)

    def get(self, section: int, name: str) -> bytes:
        return self.store.get(self.key(section, name))

    def open(self, section: int, name: str) -> BinaryIO:
        return self.store.open(self.key(section, name))

    def delete(self, section: int, name: str) -> None:
        self.store.delete(self.key(section, name))
