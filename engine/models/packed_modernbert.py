"""A padding-free forward for ModernBERT encoders, run over an already-loaded HF ``ModernBertModel``.

Pre-norm layers (LayerNorms, no bias in the released models), one fused ``Wqkv`` projection,
RoPE, a GeGLU MLP, and a final norm. Layers alternate: every ``global_attn_every_n_layers``-th is
global (full bidirectional attention, the global rope theta), the others local: a token attends
the keys within ``local_attention // 2`` of it on either side (transformers' SDPA mask,
``|query - key| <= config.sliding_window``), with the local rope theta. Long documents gain most:
a local layer over a packed sequence costs ``O(len * window)`` (engine/attention.py).

The HF modules run as they are (norms, projections, rotary tables); dropout is skipped whatever
the module's mode. Inference only: run under ``torch.inference_mode()`` or ``torch.no_grad()``.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from poolq.engine.attention import varlen_attention
from poolq.engine.models.packed_bert import _child
from poolq.engine.models.packed_rope import RopeStep, rotary_function, static_rope

_MODEL_TYPES = frozenset({"modernbert"})
_SLIDING = "sliding_attention"


def supports(model: nn.Module) -> bool:
    """Whether ``model`` is an HF ``ModernBertModel`` that :class:`PackedModernBertEncoder` reproduces exactly."""
    config = getattr(model, "config", None)
    return (
        getattr(config, "model_type", None) in _MODEL_TYPES
        and getattr(config, "layer_types", None) is not None
        and all(hasattr(model, part) for part in ("embeddings", "layers", "final_norm", "rotary_emb"))
        and static_rope(getattr(model, "rotary_emb"))
    )


class PackedModernBertLayer(nn.Module):
    """``h += Wo(attn(rope(Wqkv(attn_norm(h))))); h += Wo(act(in) * gate)`` with ``in, gate = Wi(mlp_norm(h))``."""

    def __init__(self, hf_layer: nn.Module, config) -> None:
        super().__init__()
        attention, mlp = _child(hf_layer, "attn", nn.Module), _child(hf_layer, "mlp", nn.Module)
        self.attn_norm = _child(hf_layer, "attn_norm", nn.Module)  # nn.Identity on layer 0
        self.wqkv, self.wo = _child(attention, "Wqkv", nn.Linear), _child(attention, "Wo", nn.Linear)
        self.head_dim = int(getattr(attention, "head_dim"))
        self.rope_key: str = getattr(hf_layer, "attention_type")
        # The SDPA mask's reach (create_bidirectional_sliding_window_mask), not the attention module's
        # own sliding_window: that one is one wider, for flash-attn's inclusive bounds.
        self.window = int(config.sliding_window) if self.rope_key == _SLIDING else None
        self.rotate = rotary_function(attention)
        self.mlp_norm = _child(hf_layer, "mlp_norm", nn.Module)
        self.wi, self.mlp_out = _child(mlp, "Wi", nn.Linear), _child(mlp, "Wo", nn.Linear)
        activation = getattr(mlp, "act")
        if not callable(activation):
            raise ValueError(f"{type(mlp).__name__}.act is not callable")
        self.activation: Callable[[torch.Tensor], torch.Tensor] = activation

    def forward(self, hidden: torch.Tensor, step: RopeStep) -> torch.Tensor:  # [num_tokens, hidden]
        num_tokens = hidden.shape[0]
        qkv = self.wqkv(self.attn_norm(hidden)).view(num_tokens, 3, -1, self.head_dim)  # [T, 3, heads, head_dim]
        q, k, v = qkv.unbind(1)
        cos, sin = step.rope[self.rope_key]  # [T, head_dim]
        q, k = self.rotate(q, k, cos, sin, unsqueeze_dim=1)
        context = varlen_attention(q, k, v, step.cu_seqlens_cpu, step.cu_seqlens_dev, step.max_seqlen,
                                   window=self.window, scale=self.head_dim ** -0.5)
        hidden = hidden.add_(self.wo(context.reshape(num_tokens, -1)))
        x, gate = self.wi(self.mlp_norm(hidden)).chunk(2, dim=-1)
        return hidden.add_(self.mlp_out(self.activation(x) * gate))


class PackedModernBertEncoder(nn.Module):
    """The HF ModernBERT forward on packed sequences: the last hidden state (after ``final_norm``) per token."""

    supports = staticmethod(supports)

    def __init__(self, model: nn.Module) -> None:
        if not supports(model):
            raise ValueError(f"PackedModernBertEncoder does not support {type(model).__name__}; check supports() first")
        super().__init__()
        config = getattr(model, "config")  # a PretrainedConfig, which torch's stubs would type as Tensor | Module
        embeddings = _child(model, "embeddings", nn.Module)
        self.tok_embeddings = _child(embeddings, "tok_embeddings", nn.Embedding)
        self.embedding_norm = _child(embeddings, "norm", nn.Module)
        self.layers = nn.ModuleList(PackedModernBertLayer(layer, config) for layer in _child(model, "layers", nn.ModuleList))
        self.final_norm = _child(model, "final_norm", nn.Module)
        self.rotary_emb = _child(model, "rotary_emb", nn.Module)
        self.rope_keys = frozenset(config.layer_types)

    def forward(
        self,
        input_ids: torch.Tensor,  # [num_tokens] int64, on the model's device
        position_ids: torch.Tensor,  # [num_tokens] int64, restarting at 0 per sequence
        cu_seqlens_cpu: torch.Tensor,  # [num_seqs + 1] int32, on the CPU
        max_seqlen: int,
        token_type_ids: torch.Tensor | None = None,  # unused: ModernBERT has no segment embeddings
        *,
        cu_seqlens_dev: torch.Tensor | None = None,  # [num_seqs + 1] int32 on the device; made if None
    ) -> torch.Tensor:  # [num_tokens, hidden]
        """Last hidden state of every token of every packed sequence."""
        hidden = self.embedding_norm(self.tok_embeddings(input_ids))  # [num_tokens, hidden]
        step = RopeStep.build(self.rotary_emb, self.rope_keys, hidden, position_ids, cu_seqlens_cpu, max_seqlen,
                              cu_seqlens_dev)
        for layer in self.layers:
            hidden = layer(hidden, step)
        return self.final_norm(hidden)
