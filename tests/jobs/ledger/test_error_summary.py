"""Errors in brief: counts by code, the first messages in order, and a one-line reason."""
from poolq.jobs.inputs.records import RecordError
from poolq.jobs.ledger.error_summary import SAMPLES_KEPT, ErrorSummary, merge_all


def test_a_summary_counts_by_code_keeps_the_first_messages_and_merges_in_order():
    errors = [RecordError(f"d{i}", i, "document_too_long" if i % 3 else "missing_text", f"line {i}: why") for i in range(1, 8)]
    first, second = ErrorSummary.of(errors[:2]), ErrorSummary.of(errors[2:])
    total = merge_all([first, second])
    assert total == ErrorSummary.of(errors)
    assert total.codes == {"document_too_long": 5, "missing_text": 2} and total.count == 7
    assert total.samples == tuple(f"line {i}: why" for i in range(1, SAMPLES_KEPT + 1))
    assert total.describe() == "5 document_too_long, 2 missing_text; first: line 1: why"
    assert ErrorSummary().describe() == "no record failed" and merge_all([]) == ErrorSummary()
