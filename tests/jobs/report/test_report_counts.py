"""The data report's building blocks: fixed-edge histograms merge exactly, distinct counters are
exact under their cap and a mergeable sketch past it, shard stats add up to the whole."""
import hashlib
import random

import pytest

from poolq.engine import ChunkSpan, PoolingOutput, RequestError
from poolq.jobs.report.distinct_counter import DistinctCounter
from poolq.jobs.report.histogram import TOKEN_EDGES, Histogram
from poolq.jobs.report.shard_stats import ShardStats


def _hash(value) -> str:
    return hashlib.sha256(str(value).encode()).hexdigest()


def test_histograms_with_the_same_edges_merge_exactly():
    values = [random.Random(1).randint(1, 100_000) for _ in range(1000)]
    left, right, whole = Histogram(), Histogram(), Histogram()
    left.add_all(values[:400])
    right.add_all(values[400:])
    whole.add_all(values)
    assert left.merge(right) == whole and whole.total == 1000
    assert whole.labels()[0] == "0-15" and whole.labels()[-1] == f"{TOKEN_EDGES[-1]}+"
    with pytest.raises(ValueError, match="different bucket edges"):
        whole.merge(Histogram(edges=[0, 10]))


def test_a_value_lands_in_the_bucket_its_edges_say():
    histogram = Histogram()
    for value in (0, 15, 16, 511, 512, 10**9):
        histogram.add(value)
    assert histogram.counts[:2] == [2, 1] and histogram.counts[TOKEN_EDGES.index(256)] == 1
    assert histogram.counts[TOKEN_EDGES.index(512)] == 1 and histogram.counts[-1] == 1


def test_distinct_counter_is_exact_under_its_cap_and_a_sketch_beyond():
    exact = DistinctCounter(exact_cap=100)
    for value in [1, 2, 2, 3, 3, 3]:
        exact.add(_hash(value))
    assert exact.count().model_dump() == {"distinct": 3, "method": "exact"}
    sketch = DistinctCounter(exact_cap=100)
    for value in range(50_000):
        sketch.add(_hash(value % 20_000))
    counted = sketch.count()
    assert counted.method == "hyperloglog" and abs(counted.distinct - 20_000) / 20_000 < 0.05
    assert sketch.exact is None  # past the cap nothing grows but the fixed registers


def test_distinct_counters_merge_to_the_counter_of_both_streams():
    left, right, both = DistinctCounter(exact_cap=5000), DistinctCounter(exact_cap=5000), DistinctCounter(exact_cap=5000)
    for value in range(3000):
        (left if value % 2 else right).add(_hash(value % 2500))
        both.add(_hash(value % 2500))
    merged = left.merge(right)
    assert merged.count() == both.count() and merged.count().distinct == 2500
    assert merged.registers == both.registers
    # Past the cap a merge is the sketch's: the registers' maxima are the registers of the union
    small = DistinctCounter.from_json(left.to_json(), exact_cap=10).merge(DistinctCounter.from_json(right.to_json(), 10))
    assert small.exact is None and small.registers == both.registers


def _chunks(*lengths, split=()):
    spans, start = [], 1
    for index, length in enumerate(lengths):
        spans.append(ChunkSpan(index, start, start + length, 0, 1, index in split))
        start += length
    return tuple(spans)


def test_shard_stats_count_cuts_splits_failures_and_duplicates_and_merge_to_the_whole():
    results = [
        PoolingOutput("a", None, num_tokens=40, truncated=False, processed_tokens=40),
        PoolingOutput("b", None, num_tokens=900, truncated=True, processed_tokens=512),
        PoolingOutput("c", None, num_tokens=300, truncated=False, processed_tokens=300, chunks=_chunks(100, 100, 98)),
        PoolingOutput("d", None, num_tokens=700, truncated=False, processed_tokens=700,
                      chunks=_chunks(255, 255, 188, split=(0, 1))),
        RequestError("e", "document_too_long", "too long"),
        RequestError("f", "document_too_long", "too long"),
        RequestError("g", "empty_after_tokenization", "empty"),
    ]
    hashes = [_hash(v) for v in (1, 2, 3, 4, 5, 1, 1)]
    left, right, whole = ShardStats(window=512), ShardStats(window=512), ShardStats(window=512)
    for index, (result, content) in enumerate(zip(results, hashes)):
        (left if index < 3 else right).observe(result, content)
        whole.observe(result, content)
    merged = ShardStats.from_json(left.to_json()).merge(ShardStats.from_json(right.to_json()))
    report = merged.report(plan_failures={"duplicate_id": 1}, reused_documents=2)
    assert report == whole.report(plan_failures={"duplicate_id": 1}, reused_documents=2)
    assert (report.documents, report.truncated, report.chunked, report.split, report.split_chunks) == (7, 1, 2, 1, 2)
    assert report.failed == {"document_too_long": 2, "empty_after_tokenization": 1, "duplicate_id": 1}
    assert [(e.code, e.count) for e in report.top_errors][0] == ("document_too_long", 2)
    assert report.document_tokens.total == 4 and report.chunk_tokens is not None and report.chunk_tokens.total == 6
    assert (report.distinct_documents, report.distinct_method) == (5, "exact")
    assert report.duplicate_rate == pytest.approx(2 / 7) and report.reuse_rate == pytest.approx(2 / 7)
