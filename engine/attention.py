"""Variable-length (packed) attention: sequences back to back in ``[num_tokens, heads, head_dim]``.

Sequence ``i`` occupies rows ``cu_seqlens[i]:cu_seqlens[i + 1]`` and attends only to itself.
No padding token is ever computed.

* CPU: a loop over sequences calling ``F.scaled_dot_product_attention`` on 4D strided views.
  A 4D ``[batch, heads, len, head_dim]`` input dispatches to the CPU flash kernel without a copy;
  3D views fall back to the math kernel, about 4.5x slower (engine notes, section 2). The
  Python loop costs little next to the kernels at tens of sequences per call; consecutive
  sequences of one length (windows of a long document) go in as one batch.
  In bfloat16 a sequence of up to ``EXPLICIT_MAX_TOKENS`` takes two GEMMs and a softmax
  instead: oneDNN's bf16 GEMMs (AVX-512-BF16) beat the flash kernel at BERT's head sizes,
  1.9x on a 512-token sequence with 12 heads of 32 and +11% (mixed lengths) to +26% (512-token
  windows) for MiniLM end to end, at the same cosine to float32 (measured on an AVX-512-BF16
  CPU, ``infra/bench/attention_probe.py``). Its ``[heads, len, len]`` scores are materialized,
  hence the length cap. Only where the CPU has AVX-512-BF16 and no AMX (hardware.py's
  ``explicit_bf16_attention``): with oneDNN emulating bf16 (AVX-512 without BF16, AVX2) the GEMMs
  are 5-20x slower and the flash kernel wins (measured with ``ONEDNN_MAX_CPU_ISA`` capped: 1.3x
  slower at AVX512_CORE, 24x at AVX2); with AMX the flash kernel runs its blocks on the tiles and
  wins too (2x per call at 512 tokens, 1.3x MiniLM end to end, Xeon with AMX, 2026-12-05).
* CUDA with fp16/bf16 and no bias: ``torch.nn.attention.varlen.varlen_attn`` (FlashAttention-2
  varlen). Any other case on CUDA takes the same per-sequence loop, which is exact everywhere.

Beyond plain attention: ``causal`` (decoders), a sliding ``window`` (ModernBERT's local layers,
Gemma3's and Mistral's sliding layers), grouped K/V heads (GQA: ``k``/``v`` with fewer heads than
``q``, query head ``h`` reading K/V head ``h // (heads / kv_heads)`` as transformers' ``repeat_kv``)
and a custom ``scale`` (Gemma3's ``query_pre_attn_scalar``). On the loop, a sequence longer than
its window runs as blocks of ``WINDOW_BLOCK`` queries against the keys their window reaches, so
a local layer over an 8k-token document costs ``O(len * window)``, not ``O(len^2)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from poolq.engine.device.hardware import explicit_bf16_attention_cpu

_FLASH_DTYPES = (torch.float16, torch.bfloat16)
# The longest sequence whose bf16 scores are materialized (12 heads: 25 MB); longer ones take SDPA.
EXPLICIT_MAX_TOKENS = 1024
# Queries per block where a sliding window is shorter than its sequence (_Shape.blocks); a block
# reads its own keys plus the window's reach on either side.
WINDOW_BLOCK = 256


def varlen_attention(
    q: torch.Tensor,  # [num_tokens, heads, head_dim]
    k: torch.Tensor,  # [num_tokens, kv_heads, head_dim], kv_heads dividing heads
    v: torch.Tensor,  # [num_tokens, kv_heads, head_dim]
    cu_seqlens_cpu: torch.Tensor,  # [num_seqs + 1] int32, on the CPU (drives the loop)
    cu_seqlens_dev: torch.Tensor | None,  # [num_seqs + 1] int32, on q's device (for CUDA kernels)
    max_seqlen: int,
    *,
    causal: bool = False,
    window: int | None = None,
    scale: float | None = None,
    position_bias: torch.Tensor | None = None,  # [heads, >= max_seqlen, >= max_seqlen]
    out: torch.Tensor | None = None,  # [num_tokens, heads, head_dim], contiguous
) -> torch.Tensor:  # [num_tokens, heads, head_dim]
    """Attention of every packed sequence to itself, scaled by ``scale`` (default ``1 / sqrt(head_dim)``).

    ``window``: the largest distance ``|query - key|`` a query attends (inclusive; None: no limit);
    with ``causal`` only keys at or before the query count, so a query sees ``window + 1`` keys.
    ``position_bias`` is an additive score bias that depends only on positions within a
    sequence (MPNet's relative bias): a sequence of length ``L`` uses ``position_bias[:, :L, :L]``.
    Inputs may be strided views (for example slices of a fused QKV projection). ``out``, if
    given, is where the per-sequence loop writes (callers reuse one buffer across layers); the
    flash kernel returns its own tensor, so always use the return value.
    """
    if q.shape[1] % k.shape[1] or k.shape[1] != v.shape[1]:
        raise ValueError(f"varlen_attention: {q.shape[1]} query heads cannot share {k.shape[1]} key and "
                         f"{v.shape[1]} value heads (the query heads must be a multiple of equal K/V heads)")
    if window is not None and window < 0:
        raise ValueError(f"varlen_attention: window must be >= 0 (a distance in tokens), got {window}")
    flash_varlen = _flash_varlen_kernel(q, position_bias) if cu_seqlens_dev is not None else None
    if flash_varlen is not None:
        return flash_varlen(q, k, v, cu_seqlens_dev, cu_seqlens_dev, max_seqlen, max_seqlen,
                            **_flash_options(q, k, causal, window, scale))
    if out is None:
        # q may be a strided view of a fused projection; the output is a fresh dense tensor.
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    shape = _Shape(causal, window, scale, q.shape[1] // k.shape[1])
    return _per_sequence_sdpa(q, k, v, cu_seqlens_cpu.tolist(), shape, position_bias, out)


def _flash_varlen_kernel(q: torch.Tensor, position_bias: torch.Tensor | None):
    """torch's FlashAttention varlen op where it applies (CUDA, fp16/bf16, no bias), else None."""
    if not q.is_cuda or q.dtype not in _FLASH_DTYPES or position_bias is not None:
        return None
    try:
        from torch.nn.attention.varlen import varlen_attn  # torch >= 2.9
    except ImportError:
        return None
    return varlen_attn


def _flash_options(q: torch.Tensor, k: torch.Tensor, causal: bool, window: int | None, scale: float | None) -> dict:
    """varlen_attn's keywords; the defaults are left out, so torch versions without them still run."""
    # No is_causal flag there: window_size (left, right) bounds the keys around each query, -1 none.
    left = -1 if window is None else window
    options: dict = {"window_size": (left, 0 if causal else left)}
    if scale is not None:
        options["scale"] = scale
    if q.shape[1] != k.shape[1]:
        options["enable_gqa"] = True
    return options


@dataclass(frozen=True)
class _Shape:
    """What every sequence of one call shares: which keys a query sees, and how scores scale."""

    causal: bool
    window: int | None
    scale: float | None  # None: SDPA's own 1 / sqrt(head_dim)
    kv_groups: int  # query heads per K/V head

    def blocks(self, length: int) -> list[tuple[int, int, int, int]]:
        """(query start, query end, key start, key end) within a sequence of ``length``: one block
        unless the window is shorter than the sequence, then runs of ``WINDOW_BLOCK`` queries
        against only the keys their window reaches."""
        if self.window is None or self.window + 1 >= length:
            return [(0, length, 0, length)]
        step, reach = max(WINDOW_BLOCK, self.window), self.window
        return [(start, min(start + step, length), max(0, start - reach),
                 min(start + step, length) if self.causal else min(start + step + reach, length))
                for start in range(0, length, step)]

    def windowed(self, rows: range, cols: range) -> bool:
        """Whether the window leaves out some key of this block (else it changes nothing here)."""
        reach = max(rows.stop - 1 - cols.start, cols.stop - 1 - rows.start)  # the farthest |key - query|
        return self.window is not None and self.window < reach

    def allowed(self, rows: range, cols: range, device: torch.device) -> torch.Tensor | None:
        """[rows, cols] bool, True where the query may read the key; None where every key is allowed."""
        window = self.window if self.windowed(rows, cols) else None
        if window is None and not self.causal:
            return None
        distance = (torch.arange(cols.start, cols.stop, device=device)[None, :]
                    - torch.arange(rows.start, rows.stop, device=device)[:, None])  # key - query
        near = None if window is None else distance.abs() <= window
        if not self.causal:
            return near
        return distance <= 0 if near is None else near.logical_and_(distance <= 0)


def _per_sequence_sdpa(q, k, v, bounds: list[int], shape: _Shape, position_bias, out: torch.Tensor) -> torch.Tensor:
    for start, length, count in equal_length_runs(bounds):
        # A run of equal lengths is one batched call: the same blocks and masks, one kernel launch
        # (1.2x on 512-token windows, bit-identical to one call per sequence). The explicit path
        # keeps one sequence per call, which bounds its materialized scores.
        batch = 1 if explicit_attention_applies(q, length) else count
        for first in range(start, start + count * length, batch * length):
            _attend_run(q, k, v, first, length, batch, shape, position_bias, out)
    return out


def equal_length_runs(bounds: list[int]) -> list[tuple[int, int, int]]:
    """(first token, length, count) of each run of consecutive sequences of one length in ``cu_seqlens``."""
    runs: list[tuple[int, int, int]] = []
    for start, end in zip(bounds[:-1], bounds[1:]):
        if runs and runs[-1][1] == end - start:
            runs[-1] = (runs[-1][0], end - start, runs[-1][2] + 1)
        else:
            runs.append((start, end - start, 1))
    return runs


def _attend_run(q, k, v, start: int, length: int, batch: int, shape: _Shape, position_bias, out: torch.Tensor) -> None:
    """Attention of ``batch`` sequences of ``length`` lying back to back from token ``start``."""
    def per_sequence(x: torch.Tensor) -> torch.Tensor:  # [batch, length, heads, head_dim], a view
        return x[start:start + batch * length].unflatten(0, (batch, length))

    qs, ks, vs, outs = per_sequence(q), per_sequence(k), per_sequence(v), per_sequence(out)
    for q_start, q_end, k_start, k_end in shape.blocks(length):
        rows, cols = range(q_start, q_end), range(k_start, k_end)
        # SDPA's is_causal flag where it is exactly what is wanted: cheaper than a mask.
        causal_flag = shape.causal and position_bias is None and rows == cols and not shape.windowed(rows, cols)
        mask = None if causal_flag else _block_mask(shape, rows, cols, position_bias, q)
        attend = _explicit_attention if explicit_attention_applies(q, max(len(rows), len(cols))) else _sdpa
        seq_out = attend(
            qs[:, q_start:q_end].transpose(1, 2),  # [batch, heads, rows, head_dim], no copy
            ks[:, k_start:k_end].transpose(1, 2),  # [batch, kv_heads, cols, head_dim]
            vs[:, k_start:k_end].transpose(1, 2),
            mask,
            causal_flag,
            shape,
        )  # [batch, heads, rows, head_dim]
        outs[:, q_start:q_end] = seq_out.transpose(1, 2)


def _block_mask(shape: _Shape, rows: range, cols: range, position_bias, q: torch.Tensor) -> torch.Tensor | None:
    """The block's additive bias (MPNet) with -inf where a key is out of reach, or a bool mask, or None."""
    allowed = shape.allowed(rows, cols, q.device)  # [rows, cols] or None
    if position_bias is None:
        return None if allowed is None else allowed[None, None]
    bias = position_bias[:, rows.start:rows.stop, cols.start:cols.stop]  # [heads, rows, cols], a strided view
    if allowed is not None:
        bias = bias.masked_fill(allowed.logical_not(), float("-inf"))
    return bias[None]  # [1, heads, rows, cols]


def explicit_attention_applies(q: torch.Tensor, length: int) -> bool:
    """Whether a sequence of ``length`` takes two GEMMs and a softmax rather than SDPA (module
    docstring): bf16 on a CPU with AVX-512-BF16 and no AMX, where oneDNN's GEMMs beat the flash kernel."""
    return (q.dtype == torch.bfloat16 and not q.is_cuda and length <= EXPLICIT_MAX_TOKENS
            and explicit_bf16_attention_cpu())


def _sdpa(q, k, v, mask: torch.Tensor | None, causal: bool, shape: _Shape) -> torch.Tensor:  # [batch, heads, len, d]
    gqa = {"enable_gqa": True} if shape.kv_groups > 1 else {}  # torch >= 2.5; left out otherwise
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=shape.scale, **gqa)


def _explicit_attention(q, k, v, mask: torch.Tensor | None, causal: bool, shape: _Shape) -> torch.Tensor:
    if shape.kv_groups > 1:  # [batch, kv_heads, len, d] -> [batch, heads, len, d], transformers' repeat_kv
        k, v = k.repeat_interleave(shape.kv_groups, dim=1), v.repeat_interleave(shape.kv_groups, dim=1)
    scale = 1 / math.sqrt(q.shape[-1]) if shape.scale is None else shape.scale
    scores = torch.matmul(q, k.transpose(-1, -2)).mul_(scale)  # [batch, heads, rows, cols]
    if mask is not None and mask.dtype == torch.bool:  # keys out of reach
        scores.masked_fill_(mask.logical_not(), float("-inf"))
    elif mask is not None:  # an additive bias (_block_mask), with -inf where keys are out of reach
        scores.add_(mask)
    if causal:
        scores.masked_fill_(_future(q.shape[-2], q.device), float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)  # the softmax accumulates in float32 on the CPU


def _future(length: int, device: torch.device) -> torch.Tensor:  # [len, len] bool
    """True where a key comes after its query: what causal attention masks."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu_(1)


def varlen_attention_reference(
    q: torch.Tensor,  # [num_tokens, heads, head_dim]
    k: torch.Tensor,  # [num_tokens, kv_heads, head_dim]
    v: torch.Tensor,
    cu_seqlens: torch.Tensor | list[int],  # [num_seqs + 1]
    *,
    causal: bool = False,
    window: int | None = None,
    scale: float | None = None,
    position_bias: torch.Tensor | None = None,  # [heads, >= max_seqlen, >= max_seqlen]
) -> torch.Tensor:  # [num_tokens, heads, head_dim], float64
    """Textbook softmax attention per sequence in float64: the oracle for tests, not for speed."""
    bounds = cu_seqlens.tolist() if isinstance(cu_seqlens, torch.Tensor) else list(cu_seqlens)
    groups = q.shape[1] // k.shape[1]
    outputs = []
    for start, end in zip(bounds[:-1], bounds[1:]):
        qs = q[start:end].double().transpose(0, 1)  # [heads, len, head_dim]
        ks, vs = (x[start:end].double().repeat_interleave(groups, dim=1).transpose(0, 1) for x in (k, v))
        scores = qs @ ks.transpose(1, 2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)  # [heads, len, len]
        if position_bias is not None:
            scores = scores + position_bias[:, : end - start, : end - start].double()
        positions = torch.arange(end - start, device=q.device)
        distance = positions[None, :] - positions[:, None]  # [len, len], key - query
        if causal:
            scores = scores.masked_fill(distance > 0, float("-inf"))
        if window is not None:
            scores = scores.masked_fill(distance.abs() > window, float("-inf"))
        outputs.append((scores.softmax(-1) @ vs).transpose(0, 1))  # [len, heads, head_dim]
    return torch.cat(outputs)
