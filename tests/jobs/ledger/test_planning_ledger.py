"""The planning ledger's progress: what a planning task reads once, and hands down to the stages."""
import uuid

import pytest

from poolq.jobs.ledger.layout import JobLayout
from poolq.jobs.ledger.planning_ledger import Decided, PlanningLedger, SectionCut, SectionScan, SectionStage
from poolq.storage import LocalObjectStore


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.integration)])
def store(request, tmp_path):
    if request.param == "local":
        return LocalObjectStore(tmp_path / "store")
    return request.getfixturevalue("new_buckets").store("planning")


def _ledger(store) -> PlanningLedger:
    return PlanningLedger(store, JobLayout("jobs", uuid.uuid4().hex))


def _scan(valid: int) -> SectionScan:
    return SectionScan(lines=valid + 1, valid=valid)


def _cut(records: int) -> SectionCut:
    return SectionCut(records=records, valid=records, shards=1)


def test_before_every_section_is_scanned_progress_holds_what_is_done_and_no_record(store):
    writer = _ledger(store)
    writer.write_scan(1, _scan(4))
    progress = PlanningLedger(store, writer.layout).progress(2)
    assert progress.done == {SectionStage.SCAN: {1}, SectionStage.CUT: set()}
    assert (progress.decided, progress.scans, progress.cuts) == (None, None, None)


def test_once_every_section_is_scanned_progress_holds_the_scans_in_input_order(store):
    writer = _ledger(store)
    for section, valid in ((1, 5), (0, 3)):
        writer.write_scan(section, _scan(valid))
    progress = PlanningLedger(store, writer.layout).progress(2)
    assert [scan.valid for scan in progress.scans] == [3, 5]
    assert (progress.decided, progress.cuts) == (None, None)


def test_once_decided_progress_holds_the_decision_and_the_cuts_only_when_all_are_cut(store):
    writer = _ledger(store)
    for section in range(2):
        writer.write_scan(section, _scan(2))
    decided = writer.write_decided(Decided(first_lines=(1, 4), duplicates=1))
    writer.write_cut(0, _cut(2))
    partly = PlanningLedger(store, writer.layout).progress(2)
    assert (partly.decided, partly.scans, partly.cuts) == (decided, None, None)
    writer.write_cut(1, _cut(3))
    whole = PlanningLedger(store, writer.layout).progress(2)
    assert whole.decided == decided and [cut.records for cut in whole.cuts] == [2, 3] and whole.scans is None


def test_progress_reads_each_record_once_and_the_decision_only_after_every_scan(store, monkeypatch):
    writer = _ledger(store)
    writer.write_scan(0, _scan(2))
    reads: list[str] = []
    get = store.get
    monkeypatch.setattr(store, "get", lambda key: (reads.append(key), get(key))[1])
    reader = PlanningLedger(store, writer.layout)
    reader.progress(2)
    assert reads == []  # one section is not scanned: neither a scan nor the decision is read
    writer.write_scan(1, _scan(2))
    reader.progress(2)
    reader.progress(2)
    assert sorted(reads) == sorted([writer.layout.stage_record(0, "scan"), writer.layout.stage_record(1, "scan"),
                                    writer.layout.planning_decided, writer.layout.planning_decided])
    # the decision was asked twice while unwritten (a missing object is not kept); each scan was read once
