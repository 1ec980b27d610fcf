"""The decide stage numbers the input as its scans found it: first lines, line offsets, object starts."""
from poolq.jobs.inputs.input_format import InputFormat
from poolq.jobs.inputs.input_section import InputSection
from poolq.jobs.ledger.planning_ledger import SectionScan
from poolq.jobs.planning.decide import ScannedInput


def _section(uri: str, start: int, end: int, input_format: InputFormat = InputFormat.JSONL) -> InputSection:
    return InputSection(uri=uri, version="v1", name=None, start=start, end=end, whole=start == 0,
                        format=input_format.value)


SECTIONS = [_section("s3://b/a.jsonl", 0, 100), _section("s3://b/a.jsonl", 100, 250),
            _section("s3://b/b.parquet", 0, 4, InputFormat.PARQUET), _section("s3://b/c.jsonl", 0, 50)]
SCANS = [SectionScan(lines=7, valid=5), SectionScan(lines=4, valid=4), SectionScan(lines=4, valid=3),
         SectionScan(lines=2, valid=2)]


def test_sections_number_their_lines_within_their_objects():
    scanned = ScannedInput.of(SECTIONS, SCANS, by_object=False)
    # a.jsonl's second section starts on line 8; each object starts again at line 1
    assert scanned.first_lines == (1, 8, 1, 1)
    # a JSONL section's own lines count from 1; a Parquet section's rows are already its object's
    assert scanned.line_offsets == [0, 7, 0, 0]
    assert scanned.bounds.tolist() == [0, 5, 9, 12, 14] and scanned.valid == [5, 4, 3, 2]
    assert scanned.input_bytes == sum(section.size_bytes for section in SECTIONS)


def test_a_superseding_input_keeps_where_each_object_starts():
    assert ScannedInput.of(SECTIONS, SCANS, by_object=True).object_starts == (0, 9, 12)
    assert ScannedInput.of(SECTIONS, SCANS, by_object=False).object_starts == (0,)
