"""Triton segment pooling for CUDA: MEAN / CLS / LAST over ``hidden [num_tokens, hidden]`` spans.

Same contract as ``segment_pool_ref`` (the pure-torch oracle): ``[num_segments, hidden] float32``,
fp32 accumulation for fp32/fp16/bf16 inputs, zero rows for empty segments, optional fused L2
normalization. One kernel serves every mode: each mode picks the row range it averages
(``mean``: all rows, ``first``: the first, ``last``: the last).

Grid: without normalization, one program per (segment, BLOCK_H columns). With normalization the
row norm needs every column, so one program owns a whole segment row: pass 1 loops over the column
blocks, stores the unnormalized means and accumulates the squared norm; a CTA barrier makes those
stores visible; pass 2 rescales the row in place (re-reading H fp32 outputs, not the tokens).
Offsets are computed in int64, so token x stride products past 2**31 are fine. No autograd.

Importing this module imports triton. Set ``TRITON_INTERPRET=1`` *before* importing it to run
the kernels on CPU tensors in the Triton interpreter (tests); otherwise tensors must be on CUDA.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from poolq.engine.kernels.segment_pool_ref import POOL_MODES, check_spans, spans_from_cu_seqlens

_NORM_EPS = tl.constexpr(1e-12)  # as F.normalize: x / max(||x||, eps)


@triton.jit
def _scale_row(out_row, h_lo, h_hi, scale, BLOCK_H: tl.constexpr):
    """Multiply out_row[h_lo:h_hi] (fp32) by ``scale`` in place."""
    for h0 in range(h_lo, h_hi, BLOCK_H):
        offs_h = h0 + tl.arange(0, BLOCK_H)  # [BLOCK_H]
        h_mask = offs_h < h_hi
        vals = tl.load(out_row + offs_h, mask=h_mask, other=0.0)
        tl.store(out_row + offs_h, vals * scale, mask=h_mask)


@triton.jit
def _span_pool_kernel(
    x_ptr,  # [num_tokens, H] fp32/fp16/bf16, strides (stride_xt, stride_xh)
    starts_ptr,  # [num_spans] int32
    ends_ptr,  # [num_spans] int32
    out_ptr,  # [num_spans, H] fp32, contiguous
    H,
    h_span,  # columns per program: BLOCK_H, or H when NORMALIZE
    stride_xt,
    stride_xh,
    MODE: tl.constexpr,
    NORMALIZE: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    """Grid (num_spans, cdiv(H, h_span)): pooled columns [h_lo, h_hi) of one span.

    Kept in one function on purpose: each nested @jit call costs ~1-2 ms per program in the interpreter.
    """
    seg = tl.program_id(0)
    h_lo = tl.program_id(1) * h_span
    h_hi = tl.minimum(h_lo + h_span, H)
    lo = tl.load(starts_ptr + seg)  # rows [lo, hi) are averaged: all (MODE 0), first (1) or last (2)
    hi = tl.load(ends_ptr + seg)
    if MODE == 1:
        hi = tl.minimum(hi, lo + 1)
    elif MODE == 2:
        lo = tl.maximum(lo, hi - 1)
    inv_count = 1.0 / tl.maximum(hi - lo, 1).to(tl.float32)
    out_row = out_ptr + seg.to(tl.int64) * H
    sum_sq = 0.0
    for h0 in range(h_lo, h_hi, BLOCK_H):
        offs_h = h0 + tl.arange(0, BLOCK_H)  # [BLOCK_H]
        h_mask = offs_h < h_hi
        col_offs = offs_h.to(tl.int64)[None, :] * stride_xh  # [1, BLOCK_H]
        acc = tl.zeros([BLOCK_H], dtype=tl.float32)
        for t0 in range(lo, hi, BLOCK_T):
            offs_t = t0 + tl.arange(0, BLOCK_T)  # [BLOCK_T]
            ptrs = x_ptr + offs_t.to(tl.int64)[:, None] * stride_xt + col_offs  # [BLOCK_T, BLOCK_H]
            tile = tl.load(ptrs, mask=(offs_t < hi)[:, None] & h_mask[None, :], other=0.0)
            acc += tl.sum(tile.to(tl.float32), axis=0)  # upcast first: bf16 math is wrong in the interpreter
        pooled = acc * inv_count  # [BLOCK_H]
        tl.store(out_row + offs_h, pooled, mask=h_mask)
        if NORMALIZE:
            sum_sq += tl.sum(pooled * pooled, axis=0)
    if NORMALIZE:
        tl.debug_barrier()  # pass-1 stores by any thread of the CTA are visible to pass 2
        _scale_row(out_row, h_lo, h_hi, 1.0 / tl.maximum(tl.sqrt_rn(sum_sq), _NORM_EPS), BLOCK_H)


@dataclass(frozen=True)
class LaunchConfig:
    """Tile sizes (powers of two) and warps for one launch."""

    block_t: int
    block_h: int
    num_warps: int = 4

    def __post_init__(self) -> None:
        for name in ("block_t", "block_h", "num_warps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1 or value & (value - 1):
                raise ValueError(f"LaunchConfig.{name} must be a power of two >= 1, got {value!r}")


def default_config(hidden_size: int, mode: str) -> LaunchConfig:
    """Columns per tile up to 256; about 8k elements per [BLOCK_T, BLOCK_H] tile; one row for first/last."""
    block_h = min(triton.next_power_of_2(max(hidden_size, 1)), 256)
    block_t = 1 if mode != "mean" else min(64, 8192 // block_h)
    return LaunchConfig(block_t=block_t, block_h=block_h)


def kernel_constexprs(mode: str, normalize: bool, config: LaunchConfig) -> dict:
    """The compile-time arguments a launch uses (shared with the AOT compile test)."""
    if mode not in POOL_MODES:
        raise ValueError(f"mode must be one of {POOL_MODES}, got {mode!r}")
    return {"MODE": POOL_MODES.index(mode), "NORMALIZE": bool(normalize),
            "BLOCK_T": config.block_t, "BLOCK_H": config.block_h}


def kernel_signature(hidden_dtype: torch.dtype) -> dict:
    """Triton argument types of ``_span_pool_kernel`` for an AOT compile with ``hidden_dtype`` input."""
    x_type = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16"}[hidden_dtype]
    return {"x_ptr": x_type, "starts_ptr": "*i32", "ends_ptr": "*i32", "out_ptr": "*fp32",
            "H": "i32", "h_span": "i32", "stride_xt": "i32", "stride_xh": "i32",
            "MODE": "constexpr", "NORMALIZE": "constexpr", "BLOCK_T": "constexpr", "BLOCK_H": "constexpr"}


def _check_device(hidden: torch.Tensor) -> None:
    """Compiled kernels need CUDA tensors; the interpreter (TRITON_INTERPRET=1 at import) takes any."""
    if isinstance(_span_pool_kernel, JITFunction) and hidden.device.type != "cuda":
        raise ValueError(
            f"Triton segment pooling needs CUDA tensors, got hidden on {hidden.device}; use "
            "poolq.engine.kernels.segment_pool_ref on CPU (or set TRITON_INTERPRET=1 before importing this module)"
        )


def _span_pool(hidden, starts, ends, mode: str, normalize: bool, config: LaunchConfig | None) -> torch.Tensor:
    """Launch the kernel on already-checked spans -> [num_spans, hidden] float32."""
    _check_device(hidden)
    num_spans, hidden_size = starts.numel(), hidden.shape[1]
    out = torch.empty(num_spans, hidden_size, dtype=torch.float32, device=hidden.device)  # [num_spans, hidden]
    if num_spans == 0 or hidden_size == 0:
        return out
    config = config or default_config(hidden_size, mode)
    h_span = hidden_size if normalize else config.block_h
    grid = (num_spans, triton.cdiv(hidden_size, h_span))
    device_ctx = torch.cuda.device(hidden.device) if hidden.is_cuda else contextlib.nullcontext()
    with device_ctx:
        _span_pool_kernel[grid](
            hidden, starts, ends, out, hidden_size, h_span, hidden.stride(0), hidden.stride(1),
            num_warps=config.num_warps, **kernel_constexprs(mode, normalize, config),
        )
    return out


def span_mean(hidden, starts, ends, normalize: bool = False, *, validate: bool = True,
              config: LaunchConfig | None = None) -> torch.Tensor:
    """Mean of rows ``starts[i]:ends[i]`` of ``hidden [num_tokens, hidden]`` -> ``[num_spans, hidden] float32``.

    Spans (int32, same device) may overlap or leave gaps: late chunking pools chunk spans this way.
    ``validate=False`` skips the value checks, which cost one device-to-host sync.
    """
    check_spans(hidden, starts, ends, validate=validate)
    return _span_pool(hidden, starts, ends, "mean", normalize, config)


def _segment_pool(hidden, cu_seqlens, mode, normalize, validate, config) -> torch.Tensor:
    """Check ``cu_seqlens`` and pool each of its segments by ``mode``."""
    starts, ends = spans_from_cu_seqlens(hidden, cu_seqlens, validate=validate)  # [num_segments] each
    return _span_pool(hidden, starts, ends, mode, normalize, config)


def segment_mean(hidden, cu_seqlens, normalize: bool = False, *, validate: bool = True,
                 config: LaunchConfig | None = None) -> torch.Tensor:
    """MEAN pooling per ``cu_seqlens`` segment -> ``[num_segments, hidden] float32`` (chunk offsets work too)."""
    return _segment_pool(hidden, cu_seqlens, "mean", normalize, validate, config)


def segment_first(hidden, cu_seqlens, normalize: bool = False, *, validate: bool = True,
                  config: LaunchConfig | None = None) -> torch.Tensor:
    """CLS pooling: each segment's first row as fp32 -> ``[num_segments, hidden]``."""
    return _segment_pool(hidden, cu_seqlens, "first", normalize, validate, config)


def segment_last(hidden, cu_seqlens, normalize: bool = False, *, validate: bool = True,
                 config: LaunchConfig | None = None) -> torch.Tensor:
    """LAST pooling: each segment's last row as fp32 -> ``[num_segments, hidden]``."""
    return _segment_pool(hidden, cu_seqlens, "last", normalize, validate, config)
