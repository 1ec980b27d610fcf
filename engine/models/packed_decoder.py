"""A padding-free forward for RoPE decoders (Llama, Mistral, Qwen2, Qwen3) over an already-loaded HF base model.

All sequences of a batch lie back to back as ``[num_tokens, hidden]``; attention stays inside each
sequence (causal, grouped K/V heads, sliding windows where the model has them) through
:func:`poolq.engine.attention.varlen_attention`. Everything else runs the HF modules themselves
(embedding, RMSNorms, projections, MLP): parameters are shared, nothing is copied. The families
differ only in what their modules carry (Qwen2's Q/K/V biases, Qwen3's per-head q/k RMSNorm,
Mistral's and Qwen's sliding windows), so one layer class serves them all. Gemma3 reuses the
attention and the decoder here with its own layer (``packed_gemma3.py``).

Inference only: run under ``torch.inference_mode()`` or ``torch.no_grad()`` (residuals add in place).
"""
from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

import torch
from torch import nn

from poolq.engine.attention import varlen_attention
from poolq.engine.models.packed_bert import _child
from poolq.engine.models.packed_rope import RopeKey, RopeStep, rotary_function, static_rope


@dataclass(frozen=True)
class _Family:
    # Mistral reads one window for every layer from config.sliding_window; the others set
    # ``sliding_window`` on each sliding layer's attention module (None on full layers), and
    # Llama has none, whatever a config.json may carry.
    window_from_config: bool = False


_FAMILIES = {"llama": _Family(), "mistral": _Family(window_from_config=True), "qwen2": _Family(), "qwen3": _Family()}
_PARTS = ("embed_tokens", "layers", "norm", "rotary_emb")


def rope_decoder_supported(model: nn.Module, model_types: Container[str]) -> bool:
    """Whether ``model`` is an HF base decoder of ``model_types`` with the parts a packed decoder
    reads, causal as transformers runs it, and RoPE frequencies that do not depend on the length."""
    config = getattr(model, "config", None)
    return (
        getattr(config, "model_type", None) in model_types
        and all(hasattr(model, part) for part in _PARTS)
        # transformers honours is_causal=False only where it builds a padding mask: no exact reference
        and getattr(config, "is_causal", True) is not False
        and static_rope(getattr(model, "rotary_emb"))
    )


def supports(model: nn.Module) -> bool:
    """Whether ``model`` is an HF LlamaModel, MistralModel, Qwen2Model or Qwen3Model that
    :class:`PackedDecoder` reproduces exactly."""
    return rope_decoder_supported(model, _FAMILIES)


def sliding_window(attention: nn.Module, config, family: _Family = _Family()) -> int | None:
    """The largest ``|query - key|`` this layer attends, or None. transformers masks keys at a
    distance of ``sliding_window`` or more (causal and Gemma3's bidirectional windows alike)."""
    size = getattr(config, "sliding_window", None) if family.window_from_config else getattr(attention, "sliding_window", None)
    return None if size is None else int(size) - 1


class PackedSelfAttention(nn.Module):
    """One HF decoder attention (``q_proj``/``k_proj``/``v_proj``/``o_proj``, optional per-head
    ``q_norm``/``k_norm``) on packed tokens."""

    def __init__(self, hf_attention: nn.Module, window: int | None, rope_key: RopeKey) -> None:
        super().__init__()
        self.q_proj, self.k_proj = _child(hf_attention, "q_proj", nn.Linear), _child(hf_attention, "k_proj", nn.Linear)
        self.v_proj, self.o_proj = _child(hf_attention, "v_proj", nn.Linear), _child(hf_attention, "o_proj", nn.Linear)
        has_qk_norm = getattr(hf_attention, "q_norm", None) is not None
        self.q_norm = _child(hf_attention, "q_norm", nn.Module) if has_qk_norm else None
        self.k_norm = _child(hf_attention, "k_norm", nn.Module) if has_qk_norm else None
        self.head_dim = int(getattr(hf_attention, "head_dim"))
        self.scale = float(getattr(hf_attention, "scaling"))  # head_dim ** -0.5; Gemma3: query_pre_attn_scalar ** -0.5
        self.causal = bool(getattr(hf_attention, "is_causal", True))
        self.window = window
        self.rope_key = rope_key
        self.rotate = rotary_function(hf_attention)

    def forward(self, x: torch.Tensor, step: RopeStep) -> torch.Tensor:  # [num_tokens, hidden]
        num_tokens = x.shape[0]
        q = self.q_proj(x).view(num_tokens, -1, self.head_dim)  # [T, heads, head_dim]
        k = self.k_proj(x).view(num_tokens, -1, self.head_dim)  # [T, kv_heads, head_dim]
        v = self.v_proj(x).view(num_tokens, -1, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = step.rope[self.rope_key]  # [T, rotary_dim]: unsqueezed on the head axis below
        q, k = self.rotate(q, k, cos, sin, unsqueeze_dim=1)
        context = varlen_attention(q, k, v, step.cu_seqlens_cpu, step.cu_seqlens_dev, step.max_seqlen,
                                   causal=self.causal, window=self.window, scale=self.scale)
        return self.o_proj(context.reshape(num_tokens, -1))


class PackedDecoderLayer(nn.Module):
    """A pre-norm decoder layer (Llama's): ``h += attn(norm(h)); h += mlp(norm(h))``."""

    def __init__(self, hf_layer: nn.Module, attention: PackedSelfAttention) -> None:
        super().__init__()
        self.attention = attention
        self.input_norm = _child(hf_layer, "input_layernorm", nn.Module)
        self.post_attention_norm = _child(hf_layer, "post_attention_layernorm", nn.Module)
        self.mlp = _child(hf_layer, "mlp", nn.Module)  # gate/up/down: no dropout, runs as is

    def forward(self, hidden: torch.Tensor, step: RopeStep) -> torch.Tensor:  # [num_tokens, hidden]
        hidden = hidden.add_(self.attention(self.input_norm(hidden), step))
        return hidden.add_(self.mlp(self.post_attention_norm(hidden)))


class PackedDecoder(nn.Module):
    """The HF decoder's forward on packed sequences; returns the last hidden state per token (after
    the final norm), as ``model(input_ids).last_hidden_state`` gives for each sequence alone.

    Built from an already-loaded base model (``AutoModel.from_pretrained(...)``), sharing its modules.
    """

    supports = staticmethod(supports)

    def __init__(self, model: nn.Module) -> None:
        if not self.supports(model):
            raise ValueError(f"{type(self).__name__} does not support {type(model).__name__}; check supports() first")
        super().__init__()
        config = getattr(model, "config")  # a PretrainedConfig, which torch's stubs would type as Tensor | Module
        self.embed_tokens = _child(model, "embed_tokens", nn.Module)
        self.norm = _child(model, "norm", nn.Module)
        self.rotary_emb = _child(model, "rotary_emb", nn.Module)
        hf_layers = list(_child(model, "layers", nn.ModuleList))[: config.num_hidden_layers]  # as HF iterates them
        self.layers = nn.ModuleList(self.packed_layer(layer, config) for layer in hf_layers)
        self.rope_keys = self.rope_keys_of(config)

    def packed_layer(self, hf_layer: nn.Module, config) -> nn.Module:
        attention = _child(hf_layer, "self_attn", nn.Module)
        window = sliding_window(attention, config, _FAMILIES[config.model_type])
        return PackedDecoderLayer(hf_layer, PackedSelfAttention(attention, window, None))

    def rope_keys_of(self, config) -> frozenset[RopeKey]:
        """The rope kinds the layers read (``RopeStep.rope``): one here; one per layer type in Gemma3."""
        return frozenset({None})

    def forward(
        self,
        input_ids: torch.Tensor,  # [num_tokens] int64, on the model's device
        position_ids: torch.Tensor,  # [num_tokens] int64, restarting at 0 per sequence
        cu_seqlens_cpu: torch.Tensor,  # [num_seqs + 1] int32, on the CPU
        max_seqlen: int,
        token_type_ids: torch.Tensor | None = None,  # unused: these models have no segment embeddings
        *,
        cu_seqlens_dev: torch.Tensor | None = None,  # [num_seqs + 1] int32 on the device; made if None
    ) -> torch.Tensor:  # [num_tokens, hidden]
        """Last hidden state of every token of every packed sequence."""
        hidden = self.embed_tokens(input_ids)  # [num_tokens, hidden], a fresh tensor the layers add into
        step = RopeStep.build(self.rotary_emb, self.rope_keys, hidden, position_ids, cu_seqlens_cpu, max_seqlen, cu_seqlens_dev)
        for layer in self.layers:
            hidden = layer(hidden, step)
        return self.norm(hidden)
