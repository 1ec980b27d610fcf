"""Planning's errors come out in input order, whatever order the partitions found duplicates in."""
import json

from poolq.jobs.steps import plan_errors
from poolq.jobs.steps.plan_errors import PlanErrors


def test_first_pass_errors_and_duplicates_merge_by_object_and_line(tmp_path, monkeypatch):
    monkeypatch.setattr(plan_errors, "DUPLICATES_PER_RANGE", 2)  # several range files
    errors = PlanErrors(tmp_path)
    for source, line in [(0, 2), (0, 5), (1, 1), (1, 9)]:  # first pass: in input order
        errors.add(source, line, {"line": line, "code": "invalid_json", "source": source})
    # duplicates, as partitions find them: out of order; positions follow input order
    for position, source, line in [(6, 1, 7), (0, 0, 1), (3, 0, 8), (5, 1, 3)]:
        errors.add_duplicate(position, source, line, {"line": line, "code": "duplicate_id", "source": source})
    written = [json.loads(raw) for raw in errors.lines()]
    assert [(e["source"], e["line"]) for e in written] == [(0, 1), (0, 2), (0, 5), (0, 8), (1, 1), (1, 3), (1, 7), (1, 9)]
    assert errors.count == 8 and errors.codes == {"invalid_json": 4, "duplicate_id": 4}
