"""The packed BERT-family layer stack as one inductor graph (``EngineConfig.compile_encoder``).

Eager torch runs each pass between the GEMMs on its own: the Q bias, the residual adds, both
LayerNorms, GELU, each a read and a write of ``[num_tokens, hidden]`` or ``[num_tokens, intermediate]``.
Compiled with inductor and ``freezing`` (weights folded in as constants, prepacked for oneDNN), the
GEMMs become oneDNN linears with their bias fused, and the passes around them a few fused C++
loops. Attention stays the engine's own (``varlen_attention``, SDPA's flash kernel per run of
sequences), wrapped as one opaque op: its loop over sequences depends on ``cu_seqlens``' values.

Token counts are dynamic: one graph serves every batch, so no batch is padded, and it compiles once
per process: at the first forward after ``after_tokens`` tokens ran eager (``EngineConfig.compile_after_tokens``,
500k by default: tests, one-off commands and small jobs never pay the compile). That forward takes the
compile's time, 10-40 s on a 2-core CPU (inductor's on-disk cache, ``TORCHINDUCTOR_CACHE_DIR``, makes later
processes faster). Where compiling fails (no C++ compiler, say) the encoder logs why and runs eager.
Measured on a Xeon with AMX, bf16, MiniLM, in `poolq bench` beside the eager forward: 1.02x (mixed lengths)
and 1.04x (512-token windows), 2026-12-05 (docs/benchmarks.md); hence off by default (``compile_encoder=False``).
"""
import logging
import time
from collections.abc import Callable
from typing import Optional, TypeGuard

import torch
from torch import nn

from poolq.engine.attention import varlen_attention
from poolq.engine.models.packed_bert import PackedBertEncoder, PackedLayer

log = logging.getLogger(__name__)


@torch.library.custom_op("poolq::packed_attention", mutates_args=())
def packed_attention(qkv: torch.Tensor, cu_seqlens: torch.Tensor, heads: int,
                     position_bias: Optional[torch.Tensor]) -> torch.Tensor:
    """Attention of each packed sequence of the fused projection ``qkv`` [T, 3 * hidden] to itself:
    [T, hidden]. ``cu_seqlens`` [num_seqs + 1] int32 on the CPU; ``position_bias`` MPNet's, or None."""
    num_tokens, width = qkv.shape[0], qkv.shape[1] // 3
    q, k, v = qkv.view(num_tokens, 3, heads, width // heads).unbind(1)  # [T, heads, d] each, strided views
    out = qkv.new_empty(num_tokens, width)
    max_seqlen = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    varlen_attention(q, k, v, cu_seqlens, None, max_seqlen, position_bias=position_bias, out=out.view(q.shape))
    return out


@packed_attention.register_fake
def _packed_attention_shape(qkv, cu_seqlens, heads, position_bias):
    return qkv.new_empty(qkv.shape[0], qkv.shape[1] // 3)


def _linear(weight: torch.Tensor, bias: torch.Tensor) -> nn.Linear:
    """An ``nn.Linear`` over existing tensors (no copy): freezing folds a module's parameters."""
    linear = nn.Linear(weight.shape[1], weight.shape[0], device="meta")
    linear.weight, linear.bias = nn.Parameter(weight, requires_grad=False), nn.Parameter(bias, requires_grad=False)
    return linear


class _Layer(nn.Module):
    """A ``PackedLayer``'s arithmetic written out of place, for the compiler to fuse; the same weights.
    Its Q/K/V bias is ``PackedLayer``'s: Q's, zeros for K (softmax drops it) and V (folded into the
    output dense's bias)."""

    def __init__(self, layer: PackedLayer) -> None:
        super().__init__()
        self.heads = layer.num_heads
        width = layer.q_bias.shape[0]
        self.qkv = _linear(layer.qkv_weight, torch.cat([layer.q_bias, layer.q_bias.new_zeros(2 * width)]))
        self.attn_out = _linear(layer.attn_out.weight.detach(), layer.attn_out_bias)
        self.attn_norm, self.ffn_in, self.ffn_out, self.ffn_norm = layer.attn_norm, layer.ffn_in, layer.ffn_out, layer.ffn_norm
        self.activation = layer.activation

    def forward(self, hidden: torch.Tensor, cu_seqlens: torch.Tensor, position_bias: Optional[torch.Tensor]) -> torch.Tensor:
        context = torch.ops.poolq.packed_attention(self.qkv(hidden), cu_seqlens, self.heads, position_bias)
        hidden = self.attn_norm(hidden + self.attn_out(context))
        return self.ffn_norm(hidden + self.ffn_out(self.activation(self.ffn_in(hidden))))


class _Stack(nn.Module):
    def __init__(self, encoder: PackedBertEncoder) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_Layer(layer) for layer in encoder.layers if isinstance(layer, PackedLayer))

    def forward(self, hidden: torch.Tensor, cu_seqlens: torch.Tensor, position_bias: Optional[torch.Tensor]) -> torch.Tensor:
        for layer in self.layers:
            hidden = layer(hidden, cu_seqlens, position_bias)
        return hidden


def can_compile(encoder: nn.Module) -> TypeGuard[PackedBertEncoder]:
    """A packed BERT-family encoder with every layer in its plain form (not int8, no fused norms)."""
    return isinstance(encoder, PackedBertEncoder) and all(
        isinstance(layer, PackedLayer) and layer.int8 is None and layer.bias_norm is None for layer in encoder.layers)


def _inductor(stack: nn.Module) -> Callable[..., torch.Tensor]:
    """``stack`` compiled by inductor with frozen weights, for every token count (dynamic shapes, no padding)."""
    import torch._inductor.config as inductor_config  # imports dynamo (seconds): only where the stack compiles

    compiled = torch.compile(stack, dynamic=True)

    def forward(*args: torch.Tensor | None) -> torch.Tensor:
        # Freezing is read at several stages of the compile, not all of which see torch.compile's
        # options: the process-wide setting, set for this call only.
        with inductor_config.patch(freezing=True):
            return compiled(*args)

    return forward


class CompiledBertEncoder(nn.Module):
    """A ``PackedBertEncoder``'s forward (same signature, same outputs up to rounding) with its layer
    stack compiled; the embeddings and MPNet's position bias stay eager, outside the graph."""

    def __init__(self, encoder: PackedBertEncoder, after_tokens: int = 0,
                 compiler: Callable[[nn.Module], Callable] | None = None) -> None:
        """``after_tokens``: run eager until this many tokens have gone through (EngineConfig.compile_after_tokens);
        ``compiler``: what turns the layer stack into its compiled forward (tests hand in one that fails)."""
        if not can_compile(encoder):
            raise ValueError("CompiledBertEncoder needs a PackedBertEncoder of plain layers (not int8, no fused norms)")
        super().__init__()
        self.packed = encoder
        self.stack = _Stack(encoder)
        self.compiler = compiler or _inductor
        self.compiled: Callable[..., torch.Tensor] | None = None  # made at the first compiled forward
        self.eager_tokens_left = after_tokens
        self.failed: str | None = None  # why compiling failed; the eager encoder runs from then on

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cu_seqlens_cpu: torch.Tensor, max_seqlen: int,
                token_type_ids: torch.Tensor | None = None, *, cu_seqlens_dev: torch.Tensor | None = None) -> torch.Tensor:
        if self.failed is not None or self.eager_tokens_left > 0:
            self.eager_tokens_left -= input_ids.shape[0]
            return self.packed(input_ids, position_ids, cu_seqlens_cpu, max_seqlen, token_type_ids,
                               cu_seqlens_dev=cu_seqlens_dev)
        hidden = self.packed.embeddings(input_ids, position_ids, token_type_ids)  # [num_tokens, hidden]
        position_bias = self.packed.position_bias(max_seqlen, hidden.device)  # MPNet's, else None
        first, start = self.compiled is None, time.perf_counter()
        try:
            if self.compiled is None:
                self.compiled = self.compiler(self.stack)
            out = self.compiled(hidden, cu_seqlens_cpu, position_bias)
        except Exception as exc:  # noqa: BLE001 - any failure to compile (inductor's errors, a C++ compiler missing or
            # failing, a worker process that may not start the compiler's subprocesses) leaves the eager path, which is
            # exact; an error of the forward itself is raised again by the eager call below
            self.failed = f"{type(exc).__name__}: {exc}"[:500]
            log.warning("compiling the encoder failed; it runs eager from now on (%s)", self.failed)
            return self.packed(input_ids, position_ids, cu_seqlens_cpu, max_seqlen, token_type_ids,
                               cu_seqlens_dev=cu_seqlens_dev)
        if first:
            log.info("compiled the encoder's layer stack in %.1f s (once per process)", time.perf_counter() - start)
        return out
