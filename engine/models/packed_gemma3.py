"""A padding-free forward for Gemma3 text models (``Gemma3TextModel``: Gemma3 LMs, EmbeddingGemma).

Gemma3 is the RoPE decoder of ``packed_decoder.py`` with its own layer: RMSNorms on both sides of
attention and of the MLP ("sandwich" norms, each ``x * (1 + weight)``, run as the HF modules),
a scaled embedding (the HF module's ``sqrt(hidden)``), per-head q/k norms, scores scaled by
``query_pre_attn_scalar ** -0.5``, and a rope per layer type (local and global thetas).
Sliding layers attend within ``config.sliding_window``. ``use_bidirectional_attention: true``
(EmbeddingGemma) makes every layer bidirectional; transformers then halves the configured window
(``sliding_window // 2 + 1``, exclusive) and a sliding layer sees keys on both sides of the query.
"""
from __future__ import annotations

import torch
from torch import nn

from poolq.engine.models.packed_bert import _child
from poolq.engine.models.packed_decoder import (
    PackedDecoder,
    PackedSelfAttention,
    rope_decoder_supported,
    sliding_window,
)
from poolq.engine.models.packed_rope import RopeKey, RopeStep

_MODEL_TYPES = frozenset({"gemma3_text"})


def supports(model: nn.Module) -> bool:
    """Whether ``model`` is an HF ``Gemma3TextModel`` that :class:`PackedGemma3Decoder` reproduces exactly."""
    config = getattr(model, "config", None)
    return (
        rope_decoder_supported(model, _MODEL_TYPES)
        # transformers' SDPA path has no score soft-capping; Gemma3 configs leave it unset
        and getattr(config, "attn_logit_softcapping", None) is None
        and getattr(config, "layer_types", None) is not None
    )


class PackedGemma3Layer(nn.Module):
    """``h += post_attn_norm(attn(input_norm(h))); h += post_ffn_norm(mlp(pre_ffn_norm(h)))``."""

    def __init__(self, hf_layer: nn.Module, attention: PackedSelfAttention) -> None:
        super().__init__()
        self.attention = attention
        self.input_norm = _child(hf_layer, "input_layernorm", nn.Module)
        self.post_attention_norm = _child(hf_layer, "post_attention_layernorm", nn.Module)
        self.pre_feedforward_norm = _child(hf_layer, "pre_feedforward_layernorm", nn.Module)
        self.post_feedforward_norm = _child(hf_layer, "post_feedforward_layernorm", nn.Module)
        self.mlp = _child(hf_layer, "mlp", nn.Module)  # GELU-tanh gate/up/down, no dropout

    def forward(self, hidden: torch.Tensor, step: RopeStep) -> torch.Tensor:  # [num_tokens, hidden]
        hidden = hidden.add_(self.post_attention_norm(self.attention(self.input_norm(hidden), step)))
        return hidden.add_(self.post_feedforward_norm(self.mlp(self.pre_feedforward_norm(hidden))))


class PackedGemma3Decoder(PackedDecoder):
    """The HF ``Gemma3TextModel`` forward on packed sequences (see :class:`PackedDecoder`)."""

    supports = staticmethod(supports)

    def packed_layer(self, hf_layer: nn.Module, config) -> nn.Module:
        attention = _child(hf_layer, "self_attn", nn.Module)
        layer_type = getattr(attention, "layer_type")  # "sliding_attention" or "full_attention": its rope too
        return PackedGemma3Layer(hf_layer, PackedSelfAttention(attention, sliding_window(attention, config), layer_type))

    def rope_keys_of(self, config) -> frozenset[RopeKey]:
        return frozenset(config.layer_types)
