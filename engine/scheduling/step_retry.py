"""A step that runs out of memory is tried again in halves, down to one sequence.

The batch is cut where half its tokens are reached; the first half runs, then the rest, each cut
again if it runs out of memory too. A sequence that runs out of memory on its own is reported as
:class:`OutOfMemory` in its row (its request fails alone); every other row gets its value. Between
two tries the allocator's cache is emptied (``oom.release_cached_memory``).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

import numpy as np

from poolq.engine.batch import BatchMetadata
from poolq.engine.device.oom import is_out_of_memory, release_cached_memory

log = logging.getLogger(__name__)

OUT_OF_MEMORY_CODE = "out_of_memory"  # RequestError.code of a request one of whose windows ran out of memory alone

# A CUDA allocator's message runs to several hundred characters (its pools, a tuning hint): a request's error keeps its start.
_REASON_CHARS = 200

T = TypeVar("T")
# Runs the given rows (positions in the step's batch) as the given batch; one value per row, in order.
RowRunner = Callable[[BatchMetadata, Sequence[int]], Sequence[T]]


@dataclass(frozen=True)
class OutOfMemory:
    """A sequence the model ran out of memory on even alone: its tokens, and the allocator's message."""

    tokens: int
    reason: str


def run_in_halves(batch: BatchMetadata, run: RowRunner[T]) -> list[T | OutOfMemory]:
    """``run`` over every row of ``batch`` (at once when memory allows); one value per row, in order."""
    return _run(batch, range(batch.num_seqs), run)


def select_rows(batch: BatchMetadata, rows: Sequence[int]) -> BatchMetadata:
    """The batch of ``rows`` (positions in ``batch``, in order); ``batch`` itself when that is all of it."""
    if list(rows) == list(range(batch.num_seqs)):
        return batch
    spans = [(int(batch.cu_seqlens[row]), int(batch.cu_seqlens[row + 1])) for row in rows]
    take = np.concatenate([np.arange(start, end) for start, end in spans])
    cu_seqlens = np.zeros(len(spans) + 1, dtype=np.int32)
    np.cumsum([end - start for start, end in spans], out=cu_seqlens[1:])
    types = None if batch.token_type_ids is None else batch.token_type_ids[take]
    return BatchMetadata(tuple(batch.seq_indices[row] for row in rows), batch.input_ids[take],
                         batch.position_ids[take], cu_seqlens, types)


def _run(batch: BatchMetadata, rows: range, run: RowRunner[T]) -> list[T | OutOfMemory]:
    part = select_rows(batch, rows)
    outcome = _try(part, rows, run)
    if not isinstance(outcome, OutOfMemory):
        return list(outcome)
    release_cached_memory()
    if len(rows) == 1:
        log.warning("a window of %d tokens ran out of memory on its own: its request fails (%s)", part.num_tokens,
                    outcome.reason)
        return [outcome]
    cut = rows.start + _half(part.seq_lens)
    log.warning("a step of %d sequences (%d tokens) ran out of memory: trying it again as %d and %d sequences",
                len(rows), part.num_tokens, cut - rows.start, rows.stop - cut)
    return _run(batch, range(rows.start, cut), run) + _run(batch, range(cut, rows.stop), run)


def _try(part: BatchMetadata, rows: range, run: RowRunner[T]) -> Sequence[T] | OutOfMemory:
    """``run``'s values, or what ran out of memory. Only the message is kept: the error's traceback,
    and the activations its frames hold, are gone before the next try."""
    try:
        return run(part, rows)
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        first_line = (str(exc).splitlines() or [""])[0]
        return OutOfMemory(part.num_tokens, f"{type(exc).__name__}: {first_line[:_REASON_CHARS]}")


def _half(seq_lens: np.ndarray) -> int:
    """How many of the first sequences make about half the tokens: 1 to len - 1."""
    cumulative = np.cumsum(seq_lens)
    reaching = int(np.searchsorted(cumulative, cumulative[-1] / 2)) + 1
    return min(max(reaching, 1), len(seq_lens) - 1)
