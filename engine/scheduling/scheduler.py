"""Packs tokenized sequences into batches under a token budget, one step at a time. No torch here."""
from __future__ import annotations

from collections import deque
from enum import Enum
from typing import Iterator, Sequence

from poolq.engine.batch import BatchMetadata
from poolq.engine.config import EngineConfigError

_Pending = tuple[int, Sequence[int], Sequence[int] | None]  # (seq_index, token_ids, token_type_ids)


class SchedulingOrder(str, Enum):
    """Which pending sequences a step takes first."""

    # Longest first: sequences of similar length share a batch, which is what matters to a padded
    # runner (it pads every sequence to the longest of its batch).
    LONGEST_FIRST = "longest_first"
    # In arrival order: a packed runner does no padding work at all, and requests then finish
    # nearly in the order they came, so results flow out step by step.
    ARRIVAL = "arrival"


class Scheduler:
    """Holds the sequences waiting for the model; each :meth:`schedule` call makes the next batch,
    filled up to the token and sequence caps."""

    def __init__(self, max_num_batched_tokens: int, max_num_seqs: int,
                 order: SchedulingOrder = SchedulingOrder.LONGEST_FIRST) -> None:
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.order = order
        self._pending: deque[_Pending] = deque()
        self._pending_tokens = 0
        self._sorted = True

    def add(self, seq_index: int, token_ids: Sequence[int], token_type_ids: Sequence[int] | None = None) -> None:
        if len(token_ids) > self.max_num_batched_tokens:
            raise EngineConfigError(
                f"a sequence of {len(token_ids)} tokens exceeds max_num_batched_tokens="
                f"{self.max_num_batched_tokens}; raise the budget to at least the model's window"
            )
        self._pending.append((seq_index, token_ids, token_type_ids))
        self._pending_tokens += len(token_ids)
        self._sorted = False

    @property
    def pending_tokens(self) -> int:
        return self._pending_tokens

    def schedule(self) -> BatchMetadata | None:
        """The next batch (one step's worth), or None when nothing is pending."""
        if not self._pending:
            return None
        if self.order is SchedulingOrder.LONGEST_FIRST and not self._sorted:
            self._pending = deque(sorted(self._pending, key=lambda item: len(item[1]), reverse=True))
            self._sorted = True
        batch: list[_Pending] = []
        batch_tokens = 0
        while self._pending:
            length = len(self._pending[0][1])
            if batch and (len(batch) == self.max_num_seqs or batch_tokens + length > self.max_num_batched_tokens):
                break
            batch.append(self._pending.popleft())
            batch_tokens += length
        self._pending_tokens -= batch_tokens
        return _to_batch(batch)

    def drain(self) -> Iterator[BatchMetadata]:
        """Yield batches until nothing is pending."""
        while (batch := self.schedule()) is not None:
            yield batch


def _to_batch(items: list[_Pending]) -> BatchMetadata:
    return BatchMetadata.from_sequences([i for i, _, _ in items], [ids for _, ids, _ in items], [t for _, _, t in items])
