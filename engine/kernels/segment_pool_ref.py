"""Pure-torch segment pooling over the flat layout, and the input checks the Triton wrappers share.

Layout: ``hidden [num_tokens, hidden]`` holds the token states of many sequences back to back.
Segments are given either by ``cu_seqlens [num_segments + 1] int32`` (segment ``i`` is rows
``cu_seqlens[i]:cu_seqlens[i + 1]``) or by two ``int32`` arrays ``starts``/``ends [num_spans]``
(span ``i`` is rows ``starts[i]:ends[i]``). Spans may overlap, leave gaps and come in any order,
which is what late chunking needs (chunk spans pooled out of one long document's token states).
``cu_seqlens`` need not start at 0 or end at ``num_tokens``: chunk offsets are fine as they are.

Every function returns ``[num_segments, hidden] float32``, accumulated in fp32 whatever the input
dtype; an empty segment gives a zero row; ``normalize=True`` L2-normalizes each row in fp32 like
``F.normalize`` (a zero row stays zero). This module never imports triton.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

POOL_MODES = ("mean", "first", "last")
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_hidden(hidden: torch.Tensor) -> None:
    """Raise ValueError unless ``hidden`` is a 2-D fp32/fp16/bf16 tensor (any strides)."""
    if not isinstance(hidden, torch.Tensor) or hidden.dim() != 2:
        shape = tuple(hidden.shape) if isinstance(hidden, torch.Tensor) else type(hidden).__name__
        raise ValueError(f"hidden must be a 2-D tensor [num_tokens, hidden], got {shape}")
    if hidden.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"hidden must be float32, float16 or bfloat16, got {hidden.dtype}")


def _check_index_tensor(name: str, index: torch.Tensor, hidden: torch.Tensor) -> None:
    """Raise ValueError unless ``index`` is a 1-D int32 tensor on ``hidden``'s device."""
    if not isinstance(index, torch.Tensor) or index.dim() != 1:
        shape = tuple(index.shape) if isinstance(index, torch.Tensor) else type(index).__name__
        raise ValueError(f"{name} must be a 1-D tensor, got {shape}")
    if index.dtype != torch.int32:
        raise ValueError(f"{name} must be int32, got {index.dtype}")
    if index.device != hidden.device:
        raise ValueError(f"{name} is on {index.device} but hidden is on {hidden.device}")


def _check_span_values(starts: torch.Tensor, ends: torch.Tensor, num_tokens: int, what: str) -> None:
    """Raise ValueError unless 0 <= starts <= ends <= num_tokens (one host sync)."""
    bad = (starts < 0) | (ends < starts) | (ends > num_tokens)  # [num_spans]
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"{what}: need 0 <= start <= end <= num_tokens ({num_tokens}); "
            f"segment {i} is [{int(starts[i])}, {int(ends[i])})"
        )


def spans_from_cu_seqlens(
    hidden: torch.Tensor, cu_seqlens: torch.Tensor, *, validate: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Check ``cu_seqlens`` against ``hidden`` and return views ``(starts, ends)``, each [num_segments].

    ``validate=False`` skips the value checks (non-decreasing, within ``hidden``), which cost one
    device-to-host sync; the dtype, shape and device checks always run.
    """
    check_hidden(hidden)
    _check_index_tensor("cu_seqlens", cu_seqlens, hidden)
    if cu_seqlens.numel() == 0:
        raise ValueError("cu_seqlens must have num_segments + 1 >= 1 entries, got an empty tensor")
    starts, ends = cu_seqlens[:-1], cu_seqlens[1:]
    if validate:
        what = "cu_seqlens must be non-decreasing and within hidden"
        _check_span_values(starts, ends, hidden.shape[0], what)
    return starts, ends


def check_spans(hidden: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, *, validate: bool = True) -> None:
    """Raise ValueError unless ``starts``/``ends`` are matching int32 spans inside ``hidden``.

    ``validate=False`` skips the value checks (one device-to-host sync), as in ``spans_from_cu_seqlens``.
    """
    check_hidden(hidden)
    _check_index_tensor("starts", starts, hidden)
    _check_index_tensor("ends", ends, hidden)
    if starts.shape != ends.shape:
        raise ValueError(f"starts and ends must have the same length, got {starts.numel()} and {ends.numel()}")
    if validate:
        _check_span_values(starts, ends, hidden.shape[0], "spans")


def pooled_rows(starts: torch.Tensor, ends: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The row range ``[lo, hi)`` that ``mode`` averages in each span: all, the first or the last row."""
    if mode == "mean":
        return starts, ends
    if mode == "first":
        return starts, torch.minimum(ends, starts + 1)
    if mode == "last":
        return torch.maximum(starts, ends - 1), ends
    raise ValueError(f"mode must be one of {POOL_MODES}, got {mode!r}")


def span_pool_ref(
    hidden: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, mode: str = "mean", normalize: bool = False
) -> torch.Tensor:
    """Pool rows ``starts[i]:ends[i]`` of ``hidden`` by ``mode`` -> ``[num_spans, hidden] float32``."""
    check_spans(hidden, starts, ends)
    return _pool_checked(hidden, starts, ends, mode, normalize)


def _pool_checked(hidden, starts, ends, mode: str, normalize: bool) -> torch.Tensor:
    """``span_pool_ref`` on spans that already passed the checks."""
    lo, hi = pooled_rows(starts.long(), ends.long(), mode)  # [num_spans] each
    lengths = hi - lo  # [num_spans]
    span_ids = torch.arange(lengths.numel(), device=hidden.device)  # [num_spans]
    row_span = torch.repeat_interleave(span_ids, lengths)  # [num_rows]: which span each pooled row feeds
    first_row = torch.cumsum(lengths, 0) - lengths  # [num_spans]: index of each span's first pooled row
    rank = torch.arange(row_span.numel(), device=hidden.device) - first_row[row_span]  # [num_rows]
    token_ids = lo[row_span] + rank  # [num_rows]
    sums = torch.zeros(lengths.numel(), hidden.shape[1], dtype=torch.float32, device=hidden.device)
    sums.index_add_(0, row_span, hidden[token_ids].float())  # [num_spans, hidden]
    pooled = sums / lengths.clamp(min=1).unsqueeze(1).float()
    return F.normalize(pooled, dim=1) if normalize else pooled


def span_mean_ref(hidden: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, normalize: bool = False) -> torch.Tensor:
    """Mean of rows ``starts[i]:ends[i]`` -> ``[num_spans, hidden] float32`` (late-chunking spans)."""
    return span_pool_ref(hidden, starts, ends, "mean", normalize)


def segment_mean_ref(hidden: torch.Tensor, cu_seqlens: torch.Tensor, normalize: bool = False) -> torch.Tensor:
    """MEAN pooling per segment -> ``[num_segments, hidden] float32``; chunk means pass chunk offsets."""
    starts, ends = spans_from_cu_seqlens(hidden, cu_seqlens)
    return _pool_checked(hidden, starts, ends, "mean", normalize)


def segment_first_ref(hidden: torch.Tensor, cu_seqlens: torch.Tensor, normalize: bool = False) -> torch.Tensor:
    """CLS pooling: each segment's first row -> ``[num_segments, hidden] float32``."""
    starts, ends = spans_from_cu_seqlens(hidden, cu_seqlens)
    return _pool_checked(hidden, starts, ends, "first", normalize)


def segment_last_ref(hidden: torch.Tensor, cu_seqlens: torch.Tensor, normalize: bool = False) -> torch.Tensor:
    """LAST pooling: each segment's last row -> ``[num_segments, hidden] float32``."""
    starts, ends = spans_from_cu_seqlens(hidden, cu_seqlens)
    return _pool_checked(hidden, starts, ends, "last", normalize)
