"""Packs tokenized sequences into batches under a token budget. No torch here."""
from __future__ import annotations

from typing import Iterator, Sequence

from poolq.engine.batch import BatchMetadata
from poolq.engine.config import EngineConfigError


class Scheduler:
    """Length-aware packing: longest first, each batch filled up to the token and sequence caps.

    Sorting by length keeps sequences of similar length together, which is what matters for
    padded runners; a packed runner does no padding work at all.
    """

    def __init__(self, max_num_batched_tokens: int, max_num_seqs: int) -> None:
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self._pending: list[tuple[int, Sequence[int], Sequence[int] | None]] = []
        self._pending_tokens = 0

    def add(self, seq_index: int, token_ids: Sequence[int], token_type_ids: Sequence[int] | None = None) -> None:
        if len(token_ids) > self.max_num_batched_tokens:
            raise EngineConfigError(
                f"a sequence of {len(token_ids)} tokens exceeds max_num_batched_tokens="
                f"{self.max_num_batched_tokens}; raise the budget to at least the model's window"
            )
        self._pending.append((seq_index, token_ids, token_type_ids))
        self._pending_tokens += len(token_ids)

    @property
    def pending_tokens(self) -> int:
        return self._pending_tokens

    def drain(self) -> Iterator[BatchMetadata]:
        """Yield batches until nothing is pending."""
        pending = sorted(self._pending, key=lambda item: len(item[1]), reverse=True)
        self._pending, self._pending_tokens = [], 0
        batch: list[tuple[int, Sequence[int], Sequence[int] | None]] = []
        batch_tokens = 0
        for item in pending:
            full = len(batch) == self.max_num_seqs or batch_tokens + len(item[1]) > self.max_num_batched_tokens
            if batch and full:
                yield _to_batch(batch)
                batch, batch_tokens = [], 0
            batch.append(item)
            batch_tokens += len(item[1])
        if batch:
            yield _to_batch(batch)


def _to_batch(items: list[tuple[int, Sequence[int], Sequence[int] | None]]) -> BatchMetadata:
    return BatchMetadata.from_sequences([i for i, _, _ in items], [ids for _, ids, _ in items], [t for _, _, t in items])
