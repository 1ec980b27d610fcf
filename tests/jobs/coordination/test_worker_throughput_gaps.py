"""A worker's measured rate counts the gap between back-to-back shards (the last commit's
bookkeeping, the next task's dispatch and start: a backlog pays it on every shard), not a wait for work."""
import pytest

from poolq.jobs.coordination.worker_throughput import DECAY, InMemoryThroughputBoard


def _rate(board: InMemoryThroughputBoard) -> float:
    (rate,) = board.rates("m")
    return rate.tokens_per_s


def test_the_gap_before_a_shard_that_followed_straight_on_counts():
    board = InMemoryThroughputBoard()
    board.record("w1", "m", "float32", tokens=1000, seconds=1.0, now=10.0)
    # the next shard started at 10.4 (0.4 s after the last report) and ran 1.6 s
    board.record("w1", "m", "float32", tokens=1000, seconds=1.6, now=12.0)
    assert _rate(board) == pytest.approx((1000 * DECAY + 1000) / (1.0 * DECAY + 2.0))


def test_a_wait_for_work_does_not_count():
    board = InMemoryThroughputBoard()
    board.record("w1", "m", "float32", tokens=1000, seconds=1.0, now=10.0)
    board.record("w1", "m", "float32", tokens=1000, seconds=1.0, now=100.0)  # idle 89 s: no backlog then
    assert _rate(board) == pytest.approx(1000.0)
