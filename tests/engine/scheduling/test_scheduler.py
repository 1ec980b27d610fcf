import pytest

from poolq.engine.config import EngineConfigError
from poolq.engine.scheduling.scheduler import Scheduler


def test_every_sequence_is_scheduled_once_within_the_budget():
    # Given sequences of many lengths and a small token budget
    lengths = [5, 40, 17, 3, 40, 29, 1, 12, 33, 8]
    scheduler = Scheduler(max_num_batched_tokens=50, max_num_seqs=3)
    for index, length in enumerate(lengths):
        scheduler.add(index, list(range(length)))
    # When the scheduler drains
    batches = list(scheduler.drain())
    # Then each sequence appears exactly once, and no batch breaks a cap
    seen = [index for batch in batches for index in batch.seq_indices]
    assert sorted(seen) == list(range(len(lengths)))
    for batch in batches:
        assert batch.num_tokens <= 50
        assert batch.num_seqs <= 3
        assert [int(n) for n in batch.seq_lens] == [lengths[i] for i in batch.seq_indices]
    assert scheduler.pending_tokens == 0


def test_packs_longest_first():
    scheduler = Scheduler(max_num_batched_tokens=100, max_num_seqs=100)
    for index, length in enumerate([3, 9, 1, 7]):
        scheduler.add(index, [0] * length)
    (batch,) = scheduler.drain()
    assert batch.seq_indices == (1, 3, 0, 2)


def test_a_sequence_longer_than_the_budget_is_a_config_error():
    scheduler = Scheduler(max_num_batched_tokens=8, max_num_seqs=4)
    with pytest.raises(EngineConfigError, match="exceeds max_num_batched_tokens=8"):
        scheduler.add(0, [1] * 9)
