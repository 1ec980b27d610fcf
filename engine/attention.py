"""Variable-length (packed) attention: sequences back to back in ``[num_tokens, heads, head_dim]``.

Sequence ``i`` occupies rows ``cu_seqlens[i]:cu_seqlens[i + 1]`` and attends only to itself.
No padding token is ever computed.

* CPU: a loop over sequences calling ``F.scaled_dot_product_attention`` on 4D strided views.
  A 4D ``[1, heads, len, head_dim]`` input dispatches to the CPU flash kernel without a copy;
  3D views fall back to the math kernel, about 4.5x slower (engine notes, section 2). The
  Python loop costs little next to the kernels at tens of sequences per call.
  In bfloat16 a sequence of up to ``EXPLICIT_MAX_TOKENS`` takes two GEMMs and a softmax
  instead: oneDNN's bf16 GEMMs (AVX-512-BF16, AMX) beat the flash kernel at BERT's head sizes,
  1.9x on a 512-token sequence with 12 heads of 32 and +11% (mixed lengths) to +26% (512-token
  windows) for MiniLM end to end, at the same cosine to float32 (measured on an AVX-512-BF16
  CPU, ``infra/bench/attention_probe.py``). Its ``[heads, len, len]`` scores are materialized,
  hence the length cap. Only where the CPU has bf16 instructions: with oneDNN emulating bf16
  (AVX-512 without BF16, AVX2) the GEMMs are 5-20x slower and the flash kernel wins (measured
  with ``ONEDNN_MAX_CPU_ISA`` capped: 1.3x slower at AVX512_CORE, 24x at AVX2).
* CUDA with fp16/bf16 and no bias: ``torch.nn.attention.varlen.varlen_attn`` (FlashAttention-2
  varlen). Any other case on CUDA takes the same per-sequence loop, which is exact everywhere.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from poolq.engine.hardware import native_bf16_cpu

_FLASH_DTYPES = (torch.float16, torch.bfloat16)
# The longest sequence whose bf16 scores are materialized (12 heads: 25 MB); longer ones take SDPA.
EXPLICIT_MAX_TOKENS = 1024


def varlen_attention(
    q: torch.Tensor,  # [num_tokens, heads, head_dim]
    k: torch.Tensor,  # [num_tokens, heads, head_dim]
    v: torch.Tensor,  # [num_tokens, heads, head_dim]
    cu_seqlens_cpu: torch.Tensor,  # [num_seqs + 1] int32, on the CPU (drives the loop)
    cu_seqlens_dev: torch.Tensor | None,  # [num_seqs + 1] int32, on q's device (for CUDA kernels)
    max_seqlen: int,
    *,
    causal: bool = False,
    position_bias: torch.Tensor | None = None,  # [heads, >= max_seqlen, >= max_seqlen]
    out: torch.Tensor | None = None,  # [num_tokens, heads, head_dim], contiguous
) -> torch.Tensor:  # [num_tokens, heads, head_dim]
    """Attention of every packed sequence to itself, scaled by ``1 / sqrt(head_dim)``.

    ``position_bias`` is an additive score bias that depends only on positions within a
    sequence (MPNet's relative bias): a sequence of length ``L`` uses ``position_bias[:, :L, :L]``.
    Inputs may be strided views (for example slices of a fused QKV projection). ``out``, if
    given, is where the per-sequence loop writes (callers reuse one buffer across layers); the
    flash kernel returns its own tensor, so always use the return value.
    """
    flash_varlen = _flash_varlen_kernel(q, position_bias) if cu_seqlens_dev is not None else None
    if flash_varlen is not None:
        # varlen_attn has no is_causal flag: a (-1, 0) window means "all keys up to the query".
        window = (-1, 0) if causal else (-1, -1)
        return flash_varlen(q, k, v, cu_seqlens_dev, cu_seqlens_dev, max_seqlen, max_seqlen, window_size=window)
    if out is None:
        # q may be a strided view of a fused projection; the output is a fresh dense tensor.
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    return _per_sequence_sdpa(q, k, v, cu_seqlens_cpu.tolist(), causal, position_bias, out)


def _flash_varlen_kernel(q: torch.Tensor, position_bias: torch.Tensor | None):
    """torch's FlashAttention varlen op where it applies (CUDA, fp16/bf16, no bias), else None."""
    if not q.is_cuda or q.dtype not in _FLASH_DTYPES or position_bias is not None:
        return None
    try:
        from torch.nn.attention.varlen import varlen_attn  # torch >= 2.9
    except ImportError:
        return None
    return varlen_attn


def _per_sequence_sdpa(q, k, v, bounds: list[int], causal: bool, position_bias, out: torch.Tensor) -> torch.Tensor:
    for start, end in zip(bounds[:-1], bounds[1:]):
        length = end - start
        mask = None if position_bias is None else _sequence_mask(position_bias, length, causal)
        attend = _explicit_attention if explicit_attention_applies(q, length) else _sdpa
        seq_out = attend(
            q[None, start:end].transpose(1, 2),  # [1, heads, len, head_dim], no copy
            k[None, start:end].transpose(1, 2),
            v[None, start:end].transpose(1, 2),
            mask,
            causal and mask is None,
        )  # [1, heads, len, head_dim]
        out[start:end] = seq_out[0].transpose(0, 1)
    return out


def explicit_attention_applies(q: torch.Tensor, length: int) -> bool:
    """Whether a sequence of ``length`` takes two GEMMs and a softmax rather than SDPA (module
    docstring): bf16 on a CPU with bf16 instructions, where oneDNN's GEMMs are fast."""
    return q.dtype == torch.bfloat16 and not q.is_cuda and length <= EXPLICIT_MAX_TOKENS and native_bf16_cpu()


def _sdpa(q, k, v, mask: torch.Tensor | None, causal: bool) -> torch.Tensor:  # [1, heads, len, head_dim] each
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)


def _explicit_attention(q, k, v, mask: torch.Tensor | None, causal: bool) -> torch.Tensor:  # [1, heads, len, head_dim]
    scores = torch.matmul(q, k.transpose(-1, -2)).mul_(1 / math.sqrt(q.shape[-1]))  # [1, heads, len, len]
    if mask is not None:  # an additive bias (_sequence_mask), with -inf above the diagonal when causal
        scores.add_(mask)
    if causal:
        scores.masked_fill_(_future(q.shape[-2], q.device), float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)  # the softmax accumulates in float32 on the CPU


def _future(length: int, device: torch.device) -> torch.Tensor:  # [len, len] bool
    """True where a key comes after its query: what causal attention masks."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu_(1)


def _sequence_mask(position_bias: torch.Tensor, length: int, causal: bool) -> torch.Tensor:
    mask = position_bias[:, :length, :length]  # [heads, len, len], a strided view
    if causal:
        mask = mask.masked_fill(_future(length, mask.device), float("-inf"))
    return mask[None]  # [1, heads, len, len]


def varlen_attention_reference(
    q: torch.Tensor,  # [num_tokens, heads, head_dim]
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor | list[int],  # [num_seqs + 1]
    *,
    causal: bool = False,
    position_bias: torch.Tensor | None = None,  # [heads, >= max_seqlen, >= max_seqlen]
) -> torch.Tensor:  # [num_tokens, heads, head_dim], float64
    """Textbook softmax attention per sequence in float64: the oracle for tests, not for speed."""
    bounds = cu_seqlens.tolist() if isinstance(cu_seqlens, torch.Tensor) else list(cu_seqlens)
    outputs = []
    for start, end in zip(bounds[:-1], bounds[1:]):
        qs, ks, vs = (x[start:end].double().transpose(0, 1) for x in (q, k, v))  # [heads, len, head_dim]
        scores = qs @ ks.transpose(1, 2) / math.sqrt(q.shape[-1])  # [heads, len, len]
        if position_bias is not None:
            scores = scores + position_bias[:, : end - start, : end - start].double()
        if causal:
            scores = scores.masked_fill(_future(end - start, q.device), float("-inf"))
        outputs.append((scores.softmax(-1) @ vs).transpose(0, 1))  # [len, heads, head_dim]
    return torch.cat(outputs)
