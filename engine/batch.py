"""The batch-metadata contract between scheduler, runner and pooling (numpy only, no torch).

Sequences are laid out back to back in one flat token array; ``cu_seqlens`` holds the
cumulative offsets, so sequence ``i`` occupies ``input_ids[cu_seqlens[i]:cu_seqlens[i + 1]]``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class BatchMetadata:
    """One forward pass worth of sequences in the flat token layout."""

    seq_indices: tuple[int, ...]  # the caller's index of each sequence
    input_ids: np.ndarray = field(repr=False)  # [num_tokens] int64
    position_ids: np.ndarray = field(repr=False)  # [num_tokens] int64, restarting per sequence
    cu_seqlens: np.ndarray  # [num_seqs + 1] int32
    # Segment ids for text pairs (cross-encoders); None means all zeros.
    token_type_ids: np.ndarray | None = field(default=None, repr=False)  # [num_tokens] int64

    @classmethod
    def from_sequences(
        cls,
        seq_indices: Sequence[int],
        token_ids: Sequence[Sequence[int]],
        token_type_ids: Sequence[Sequence[int] | None] | None = None,
    ) -> "BatchMetadata":
        if len(seq_indices) != len(token_ids) or not token_ids:
            raise ValueError("a batch needs one or more sequences, one index per sequence")
        seq_lens = np.fromiter((len(ids) for ids in token_ids), dtype=np.int32, count=len(token_ids))
        if (seq_lens < 1).any():
            raise ValueError("every sequence needs at least one token")
        cu_seqlens = np.zeros(len(token_ids) + 1, dtype=np.int32)
        np.cumsum(seq_lens, out=cu_seqlens[1:])
        # chain.from_iterable feeds fromiter from C: half the time of a per-token generator (128 x 64 ids).
        input_ids = np.fromiter(itertools.chain.from_iterable(token_ids), dtype=np.int64, count=int(cu_seqlens[-1]))
        starts = np.repeat(cu_seqlens[:-1], seq_lens)
        position_ids = np.arange(int(cu_seqlens[-1]), dtype=np.int64) - starts
        types = None
        if token_type_ids is not None and any(t is not None for t in token_type_ids):
            types = np.concatenate(
                [np.asarray(t if t is not None else [0] * n, dtype=np.int64) for t, n in zip(token_type_ids, seq_lens)]
            )
        return cls(tuple(seq_indices), input_ids, position_ids, cu_seqlens, types)

    @property
    def num_seqs(self) -> int:
        return len(self.seq_indices)

    @property
    def num_tokens(self) -> int:
        return int(self.cu_seqlens[-1])

    @property
    def seq_lens(self) -> np.ndarray:  # [num_seqs]
        return np.diff(self.cu_seqlens)

    @property
    def max_seqlen(self) -> int:
        return int(self.seq_lens.max())

    @property
    def first_token_indices(self) -> np.ndarray:  # [num_seqs]
        return self.cu_seqlens[:-1]

    @property
    def last_token_indices(self) -> np.ndarray:  # [num_seqs]
        return self.cu_seqlens[1:] - 1
