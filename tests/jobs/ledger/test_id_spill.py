"""A section's id spill: the scan's line format, read back whole by the decide stage and less its
left-out records by the reuse pass."""
import uuid

import numpy as np
import pytest

from poolq.jobs.inputs.shard_input import InputChanged
from poolq.jobs.ledger.id_spill import SpilledRecord, kept_records, read_id_spill, spill_every_section, spill_line
from poolq.jobs.ledger.layout import JobLayout
from poolq.jobs.ledger.planning_objects import SPILL_NAME, PlanningObjects
from poolq.storage import LocalObjectStore


@pytest.fixture
def objects(tmp_path) -> PlanningObjects:
    return PlanningObjects(LocalObjectStore(tmp_path / "store"), JobLayout("jobs", uuid.uuid4().hex))


def _spill(objects: PlanningObjects, section: int, lines: list[bytes]) -> None:
    objects.put_chunks(section, SPILL_NAME, iter(lines))


def test_a_spilled_line_reads_back_as_the_record_it_was_written_from(objects):
    _spill(objects, 0, [spill_line("doc-1", "ab12", 3, None), spill_line("doc-2", "cd34", 9, "k9")])
    assert list(read_id_spill(objects, 0)) == [SpilledRecord("doc-1", "ab12", 3, None),
                                                SpilledRecord("doc-2", "cd34", 9, "k9")]
    # An incremental run compares the carry key where the job carries fields, else the content hash
    assert [record.unchanged_key for record in read_id_spill(objects, 0)] == ["ab12", "k9"]


def test_a_spill_written_before_lines_were_kept_reads_with_no_line(objects):
    _spill(objects, 0, [b"old\tef56\n"])
    assert list(read_id_spill(objects, 0)) == [SpilledRecord("old", "ef56", None, None)]


def test_kept_records_leave_out_the_positions_named(objects):
    _spill(objects, 2, [spill_line(f"d{i}", f"{i:04x}", i + 1, None) for i in range(6)])
    kept = kept_records(objects, 2, np.array([0, 3, 4], dtype=np.int64))
    assert [record.record_id for record in kept] == ["d1", "d2", "d5"]


def test_every_section_is_spilled_in_input_order_with_lines_in_their_objects(objects, tmp_path):
    _spill(objects, 0, [spill_line("a", "0001", 1, None), spill_line("b", "0002", 3, "kb")])
    _spill(objects, 1, [spill_line("c", "0003", 2, None), b"old\t0004\n"])
    added = []
    lines = spill_every_section(objects, [2, 2], [0, 10], lambda *record: added.append(record), tmp_path / "lines")
    # The second section's lines continue its object's count; a line-less old spill says 0 (unknown)
    assert added == [("a", "0001"), ("b", "kb"), ("c", "0003"), ("old", "0004")]
    assert lines.tolist() == [1, 3, 12, 0]


def test_a_spill_holding_other_than_its_scan_counted_is_an_input_change(objects, tmp_path):
    _spill(objects, 0, [spill_line("a", "0001", 1, None)])
    with pytest.raises(InputChanged, match="section 0's id spill holds 1 records where its scan counted 2"):
        spill_every_section(objects, [2], [0], lambda *record: None, tmp_path / "lines")
