"""How one request becomes model sequences, and how their results become its output.

Every request is planned into one or more sequences (windows). The scheduler batches the
windows of all documents together under the token budget; each plan folds its windows'
results into a bounded accumulator as batches finish, so a long document never needs more
than one batch of token states at a time.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Hashable

import numpy as np
import torch

from poolq.engine.pooling.window_combiners import WindowCombiner
from poolq.engine.request import ChunkRows, ChunkSpan, PooledData, PoolingOutput, PoolingParams, SparseVector

if TYPE_CHECKING:
    from poolq.engine.pooling.heads.task_heads import EmbeddingHead


@dataclass(frozen=True)
class Window:
    """A model sequence. ``keep_start``/``keep_end`` say which of its token states (in window
    coordinates) a late-chunking plan uses; ``doc_offset`` is where the window starts in the
    document's full token sequence."""

    token_ids: list[int]
    token_type_ids: list[int] | None = None
    doc_offset: int = 0
    keep_start: int = 0
    keep_end: int | None = None


@dataclass
class DocumentPlan(ABC):
    windows: list[Window]
    num_tokens: int  # the whole document, special tokens (and a prompt's) included
    truncated: bool = False
    #: True: ``add`` receives the window's raw token states; False: its pooled output.
    wants_states: bool = field(default=False, init=False)
    #: The params its windows are pooled with, when not the request's own (the prompt's tokens left out).
    pooled_with: PoolingParams | None = field(default=None, kw_only=True)

    @property
    def pool_params(self) -> PoolingParams | None:
        """The params its windows are pooled with, when not the request's own."""
        return self.pooled_with

    @abstractmethod
    def add(self, window_index: int, value) -> None: ...

    @abstractmethod
    def output(self, key: Hashable) -> PoolingOutput: ...

    @cached_property  # a plan's windows are fixed once planned; asked per document by the loop and the output
    def processed_tokens(self) -> int:
        return sum(len(window.token_ids) for window in self.windows)


@dataclass
class SinglePlan(DocumentPlan):
    """One window, one output: the ordinary case (and truncation)."""

    _data: PooledData | None = None

    def add(self, window_index: int, value: PooledData) -> None:
        self._data = value

    def output(self, key: Hashable) -> PoolingOutput:
        if self._data is None:
            raise RuntimeError("SinglePlan.output() before its window's result was added")
        return PoolingOutput(key, self._data, self.num_tokens, self.truncated, self.processed_tokens)


@dataclass
class ChunkedPlan(DocumentPlan):
    """vLLM's chunked processing: every window pooled, folded into one output by the task's
    combiner (see ``window_combiners.py``)."""

    combiner: WindowCombiner | None = None

    @property
    def pool_params(self) -> PoolingParams | None:
        combined = self.combiner.pool_params if self.combiner is not None else None
        return combined if combined is not None else self.pooled_with

    def add(self, window_index: int, value: PooledData) -> None:
        if self.combiner is None:
            raise RuntimeError("ChunkedPlan needs its task's window combiner")
        self.combiner.add(value, len(self.windows[window_index].token_ids))

    def output(self, key: Hashable) -> PoolingOutput:
        if self.combiner is None:
            raise RuntimeError("ChunkedPlan needs its task's window combiner")
        return PoolingOutput(key, self.combiner.result(), self.num_tokens, False, self.processed_tokens)


@dataclass
class NaiveChunksPlan(DocumentPlan):
    """Each chunk embedded on its own: one row per chunk."""

    chunks: tuple[ChunkSpan, ...] = ()
    _rows: dict[int, PooledData] = field(default_factory=dict)

    def add(self, window_index: int, value: PooledData) -> None:
        self._rows[window_index] = value

    def output(self, key: Hashable) -> PoolingOutput:
        rows = [self._rows[i] for i in range(len(self.windows))]
        sparse = tuple(row for row in rows if isinstance(row, SparseVector))
        data: ChunkRows = sparse if sparse else np.stack(rows)  # type: ignore[arg-type]  # [num_chunks, dim]
        return PoolingOutput(key, data, self.num_tokens, False, self.processed_tokens, self.chunks)


@dataclass
class LateChunksPlan(DocumentPlan):
    """Late chunking: chunk means over token states of one pass over the whole document
    (macro windows beyond the model's window), then the model's head per chunk."""

    chunks: tuple[ChunkSpan, ...] = ()
    head: EmbeddingHead | None = None  # projector, Matryoshka, normalize
    params: PoolingParams = field(default_factory=PoolingParams)
    _sums: torch.Tensor | None = None  # [num_chunks, hidden] float32

    def __post_init__(self) -> None:
        self.wants_states = True

    def add(self, window_index: int, value: torch.Tensor) -> None:
        window = self.windows[window_index]
        states = value  # [window_len, hidden]
        if self._sums is None:
            self._sums = torch.zeros(len(self.chunks), states.shape[1], dtype=torch.float32)
        keep_end = window.keep_end if window.keep_end is not None else len(window.token_ids)
        kept_from, kept_to = window.doc_offset + window.keep_start, window.doc_offset + keep_end
        rows, starts, ends = [], [], []  # chunk rows overlapping this window's kept states
        for row, chunk in enumerate(self.chunks):
            start, end = max(chunk.token_start, kept_from), min(chunk.token_end, kept_to)
            if start < end:
                rows.append(row)
                starts.append(start - window.doc_offset)
                ends.append(end - window.doc_offset)
        if rows:
            self._sums[rows] += _span_sums(states, starts, ends)
    def output(self, key: Hashable) -> PoolingOutput:
        if self._sums is None or self.head is None:
            raise RuntimeError("LateChunksPlan.output() needs an embed head and its windows' token states")
        lengths = torch.tensor([c.token_end - c.token_start for c in self.chunks], dtype=torch.float32)
        means = self._sums / lengths.unsqueeze(1)  # [num_chunks, hidden]
        with torch.inference_mode():
            rows = self.head.forward(means, (self.params,) * len(self.chunks))
        return PoolingOutput(key, np.stack(rows), self.num_tokens, False, self.processed_tokens, self.chunks)


def _span_sums(states: torch.Tensor, starts: list[int], ends: list[int]) -> torch.Tensor:
    """fp32 sums of ``states[start:end]`` per span, on the CPU: ``[num_spans, hidden]``."""
    if states.is_cuda:  # one Triton launch for all spans of the window
        from poolq.engine.kernels.segment_pool import span_mean

        starts_dev = torch.tensor(starts, dtype=torch.int32, device=states.device)
        ends_dev = torch.tensor(ends, dtype=torch.int32, device=states.device)
        lengths = (ends_dev - starts_dev).unsqueeze(1).float()
        return (span_mean(states, starts_dev, ends_dev) * lengths).cpu()
    return torch.stack([torch.sum(states[s:e], dim=0, dtype=torch.float32) for s, e in zip(starts, ends)])
