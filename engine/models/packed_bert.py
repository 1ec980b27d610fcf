"""A padding-free forward for BERT-family encoders, run over an already-loaded HF base model.

All sequences of a batch lie back to back as ``[num_tokens, hidden]``: embeddings, linears,
LayerNorm and the activation run on real tokens only, and attention stays inside each sequence
through :func:`poolq.engine.attention.varlen_attention`. The encoder holds the HF modules themselves
(parameters are shared, not copied); the only copies are the fused QKV weight and two
small bias vectors per layer (see ``PackedLayer``).

Families: BERT, RoBERTa, XLM-RoBERTa (absolute positions; RoBERTa-style ones count from
``padding_idx + 1``) and MPNet (adds a bucketed relative-position bias to the scores).
Inference only: dropout is skipped whatever the module's mode, and layers update their
inputs in place, so run under ``torch.inference_mode()`` or ``torch.no_grad()``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import torch
from torch import nn

from poolq.engine.attention import varlen_attention

if TYPE_CHECKING:
    from poolq.engine.models.int8_linear import LayerInt8

# model_type -> whether position ids are counted from padding_idx + 1 (fairseq style).
_FAMILIES = {"bert": False, "roberta": True, "xlm-roberta": True, "mpnet": True}
# HF's MPNetEncoder.compute_position_bias is always called with its defaults, whatever the
# config's relative_attention_num_buckets says; matching HF means using the same constants.
_MPNET_NUM_BUCKETS = 32
_MPNET_MAX_DISTANCE = 128

_M = TypeVar("_M", bound=nn.Module)


def _child(parent: nn.Module, name: str, kind: type[_M]) -> _M:
    """``parent.<name>``, checked to be a ``kind``. HF builds its module trees dynamically, and
    torch's stubs type every attribute of a module as ``Tensor | Module``."""
    child = getattr(parent, name)
    if not isinstance(child, kind):
        raise ValueError(f"{type(parent).__name__}.{name} is a {type(child).__name__}; expected {kind.__name__}")
    return child


def supports(model: nn.Module) -> bool:
    """Whether ``model`` is an HF base encoder (BertModel, RobertaModel, XLMRobertaModel,
    MPNetModel) that :class:`PackedBertEncoder` reproduces exactly."""
    config = getattr(model, "config", None)
    return (
        config is not None
        and getattr(config, "model_type", None) in _FAMILIES
        and hasattr(model, "embeddings")
        and hasattr(model, "encoder")
        and not getattr(config, "is_decoder", False)
        and not getattr(config, "add_cross_attention", False)
    )


class PackedEmbeddings(nn.Module):
    """Word + token-type + position embeddings and LayerNorm on packed tokens."""

    def __init__(self, hf_embeddings: nn.Module, padding_idx: int | None) -> None:
        super().__init__()
        self.word = _child(hf_embeddings, "word_embeddings", nn.Embedding)
        self.position = _child(hf_embeddings, "position_embeddings", nn.Embedding)
        has_token_type = getattr(hf_embeddings, "token_type_embeddings", None) is not None  # MPNet has none
        self.token_type = _child(hf_embeddings, "token_type_embeddings", nn.Embedding) if has_token_type else None
        self.norm = _child(hf_embeddings, "LayerNorm", nn.LayerNorm)
        self.padding_idx = padding_idx  # None: BERT, positions are used as given

    def forward(
        self,
        input_ids: torch.Tensor,  # [num_tokens] int64
        position_ids: torch.Tensor,  # [num_tokens] int64, restarting at 0 per sequence
        token_type_ids: torch.Tensor | None,  # [num_tokens] int64, None means all zeros
    ) -> torch.Tensor:  # [num_tokens, hidden]
        if self.padding_idx is not None:
            position_ids = _fairseq_positions(input_ids, position_ids, self.padding_idx)
        hidden = self.word(input_ids)  # [num_tokens, hidden]
        # Same summation order as HF: (word + token_type) + position.
        if self.token_type is not None:
            hidden += self.token_type.weight[0] if token_type_ids is None else self.token_type(token_type_ids)
        hidden += self.position(position_ids)
        return self.norm(hidden)


def _fairseq_positions(input_ids: torch.Tensor, position_ids: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """HF's ``create_position_ids_from_input_ids`` per packed sequence: real tokens count from
    ``padding_idx + 1``; a pad id inside a sequence gets ``padding_idx`` and is not counted."""
    is_real = input_ids.ne(padding_idx).long()  # [num_tokens]
    counted = is_real.cumsum(0)  # [num_tokens], running over the whole pack
    seq_start = torch.arange(input_ids.shape[0], device=input_ids.device) - position_ids  # [num_tokens]
    counted_before_seq = (counted - is_real)[seq_start]  # [num_tokens]
    return (counted - counted_before_seq) * is_real + padding_idx


@dataclass(frozen=True)
class _PackedPass:
    """What every layer of one forward shares: the batch layout and reusable scratch memory.

    glibc serves tensors over 32 MB straight from mmap, so every fresh [8k tokens, 1536] buffer
    page-faults on first touch; on the 2-core CI machine that cost up to a quarter of the GEMM
    writing it. One scratch per forward, reused by all layers, pays that once, not per layer.
    """

    cu_seqlens_cpu: torch.Tensor  # [num_seqs + 1] int32, CPU
    cu_seqlens_dev: torch.Tensor  # [num_seqs + 1] int32, on the encoder's device
    max_seqlen: int
    position_bias: torch.Tensor | None  # [heads, max_seqlen, max_seqlen], MPNet only
    scratch: torch.Tensor  # [num_tokens * max(3 * hidden, intermediate)], QKV then FFN input
    context: torch.Tensor  # [num_tokens, hidden], attention output

    def scratch_matrix(self, width: int) -> torch.Tensor:  # [num_tokens, width], contiguous
        num_tokens = self.context.shape[0]
        return self.scratch[: num_tokens * width].view(num_tokens, width)


class PackedLayer(nn.Module):
    """One post-LayerNorm transformer layer on packed tokens (inference only, in place).

    Q, K and V come from one GEMM over a fused ``[3 * hidden, hidden]`` weight, concatenated
    once here (a copy of 3 * hidden^2 parameters per layer; one big GEMM beats three small
    ones). Build the encoder after loading weights, and move the encoder rather than the HF
    model, so the fused copy stays in step.

    Of the three projection biases only Q's is applied, which saves a broadcast pass over the
    ``[num_tokens, 3 * hidden]`` projection. The result is mathematically unchanged:
    * K's bias adds ``q . b_k`` to every score of a query row; softmax ignores a per-row constant.
    * V's bias comes out of attention as is (each row's weights sum to 1), so it is folded into
      the output dense's bias: ``W_o (ctx + b_v) + b_o = W_o ctx + (W_o b_v + b_o)``.
    """

    # Buffers (register_buffer below); declared so that they type as tensors, not Tensor | Module.
    qkv_weight: torch.Tensor  # [3 * hidden, hidden]
    q_bias: torch.Tensor  # [hidden]
    attn_out_bias: torch.Tensor  # [hidden]
    attn_norm: nn.LayerNorm

    def __init__(self, hf_layer: nn.Module, config) -> None:
        super().__init__()
        (query, key, value), attn_out, self.attn_norm = _attention_modules(hf_layer, config.model_type)
        self.num_heads = config.num_attention_heads
        qkv_weight = torch.cat([lin.weight.detach() for lin in (query, key, value)])  # [3 * hidden, hidden]
        self.register_buffer("qkv_weight", qkv_weight, persistent=False)
        self.register_buffer("q_bias", _bias(query), persistent=False)
        folded = _bias(attn_out) + attn_out.weight.detach() @ _bias(value)  # [hidden]
        self.register_buffer("attn_out_bias", folded, persistent=False)
        self.attn_out = attn_out
        intermediate, output = _child(hf_layer, "intermediate", nn.Module), _child(hf_layer, "output", nn.Module)
        self.ffn_in = _child(intermediate, "dense", nn.Linear)
        # An ACT2FN module, or the plain callable a config may give as hidden_act.
        activation = getattr(intermediate, "intermediate_act_fn")
        if not callable(activation):
            raise ValueError(f"{type(intermediate).__name__}.intermediate_act_fn is not callable")
        self.activation: Callable[[torch.Tensor], torch.Tensor] = activation
        self.ffn_out, self.ffn_norm = _child(output, "dense", nn.Linear), _child(output, "LayerNorm", nn.LayerNorm)
        self._inplace_activation = _inplace_activation(config.hidden_act)  # None: use the module
        self.int8: LayerInt8 | None = None  # set by int8_encoder.quantize_encoder: these GEMMs run in int8
        # set by fused_norm.fuse_norms (EngineConfig.fuse_norms): bias + LayerNorm as one compiled pass
        self.bias_norm: Callable[[torch.Tensor, torch.Tensor, nn.LayerNorm], torch.Tensor] | None = None

    def forward(self, hidden: torch.Tensor, packed: _PackedPass) -> torch.Tensor:  # [num_tokens, hidden]
        """``hidden`` [num_tokens, hidden] is consumed: it becomes the attention residual sum."""
        context = self.attention_context(hidden, packed)
        if self.int8 is not None:
            return self._dense_int8(hidden, context, self.int8)
        hidden = _residual_norm(hidden, context, self.attn_out.weight, self.attn_out_bias, self.attn_norm, self.bias_norm)
        intermediate = packed.scratch_matrix(self.ffn_in.out_features)  # QKV is dead by now
        torch.addmm(_bias(self.ffn_in), hidden, self.ffn_in.weight.t(), out=intermediate)
        return self._ffn_out(hidden, intermediate)

    def attention_context(self, hidden: torch.Tensor, packed: _PackedPass) -> torch.Tensor:  # [T, hidden]
        """Attention of the fused Q/K/V projection (int8 where the layer is quantized), written into
        ``packed.context``; the dense part after it is the caller's."""
        num_tokens, width = hidden.shape
        if self.int8 is None:
            qkv = torch.mm(hidden, self.qkv_weight.t(), out=packed.scratch_matrix(3 * width))  # [T, 3 * hidden]
        else:
            qkv = self.int8.qkv(hidden)  # a new float32 tensor: fbgemm writes no caller buffer
        qkv[:, :width] += self.q_bias  # see the class docstring for K's and V's biases
        # Strided views, no copy: the CPU attention loop reads them in place.
        q, k, v = qkv.view(num_tokens, 3, self.num_heads, width // self.num_heads).unbind(1)  # [T, heads, d]
        return varlen_attention(
            q, k, v, packed.cu_seqlens_cpu, packed.cu_seqlens_dev, packed.max_seqlen,
            position_bias=packed.position_bias, out=packed.context.view(q.shape),
        ).reshape(num_tokens, width)

    def _dense_int8(self, hidden: torch.Tensor, context: torch.Tensor, int8: "LayerInt8") -> torch.Tensor:
        """The attention output and the FFN input as int8 GEMMs; the FFN output stays float32."""
        hidden = self.attn_norm(hidden.add_(int8.attn_out(context)).add_(self.attn_out_bias))
        return self._ffn_out(hidden, int8.ffn_in(hidden))  # [T, intermediate] in between

    def _ffn_out(self, hidden: torch.Tensor, intermediate: torch.Tensor) -> torch.Tensor:  # [T, hidden]
        if self._inplace_activation is not None:
            self._inplace_activation(intermediate)
        else:
            intermediate = self.activation(intermediate)
        return _residual_norm(hidden, intermediate, self.ffn_out.weight, _bias(self.ffn_out), self.ffn_norm,
                              self.bias_norm)


def _residual_norm(residual: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                   norm: nn.LayerNorm, bias_norm=None) -> torch.Tensor:
    """HF's ``LayerNorm(dense(x) + residual)`` (up to float summation order), accumulated into
    ``residual`` in place: the GEMM adds onto it directly, so no [T, hidden] temporary is written.
    ``bias_norm``: the bias add and the norm as one fused pass (fused_norm.py) instead of two."""
    summed = residual.addmm_(x, weight.t())
    return norm(summed.add_(bias)) if bias_norm is None else bias_norm(summed, bias, norm)


def _bias(linear: nn.Linear) -> torch.Tensor:
    if linear.bias is not None:
        return linear.bias.detach()
    return torch.zeros(linear.out_features, dtype=linear.weight.dtype, device=linear.weight.device)


def _inplace_activation(hidden_act: object):
    """An in-place twin of HF's ``ACT2FN[hidden_act]`` where one exists, else None.

    HF builds the layer's activation from the same config string, so these are exactly the
    same functions (erf GELU for "gelu", tanh GELU only for "gelu_pytorch_tanh")."""
    if hidden_act == "gelu":
        return torch.ops.aten.gelu_
    if hidden_act == "gelu_pytorch_tanh":
        return lambda x: torch.ops.aten.gelu_(x, approximate="tanh")
    if hidden_act == "relu":
        return torch.relu_
    return None


def _attention_modules(
    layer: nn.Module, model_type: str
) -> tuple[tuple[nn.Linear, nn.Linear, nn.Linear], nn.Linear, nn.LayerNorm]:
    """(q, k, v), attention output dense, attention LayerNorm of one HF layer."""
    attention = _child(layer, "attention", nn.Module)
    if model_type == "mpnet":
        attn = _child(attention, "attn", nn.Module)
        qkv = (_child(attn, "q", nn.Linear), _child(attn, "k", nn.Linear), _child(attn, "v", nn.Linear))
        return qkv, _child(attn, "o", nn.Linear), _child(attention, "LayerNorm", nn.LayerNorm)
    self_attention, output = _child(attention, "self", nn.Module), _child(attention, "output", nn.Module)
    qkv = (_child(self_attention, "query", nn.Linear), _child(self_attention, "key", nn.Linear),
           _child(self_attention, "value", nn.Linear))
    return qkv, _child(output, "dense", nn.Linear), _child(output, "LayerNorm", nn.LayerNorm)


class PackedBertEncoder(nn.Module):
    """The HF encoder's forward on packed sequences; returns the last hidden state per token.

    Built from an already-loaded base model (``AutoModel.from_pretrained(...)``), sharing its
    parameters. The HF pooler, if any, is not run: poolq pools token states itself.
    """

    def __init__(self, model: nn.Module) -> None:
        if not supports(model):
            raise ValueError(f"PackedBertEncoder does not support {type(model).__name__}; check supports() first")
        super().__init__()
        # A PretrainedConfig: a plain attribute, which torch's stubs would type as Tensor | Module.
        config = getattr(model, "config")
        self.model_type = config.model_type
        hf_embeddings, hf_encoder = _child(model, "embeddings", nn.Module), _child(model, "encoder", nn.Module)
        padding_idx = getattr(hf_embeddings, "padding_idx", None) if _FAMILIES[self.model_type] else None
        self.embeddings = PackedEmbeddings(hf_embeddings, padding_idx)
        self.layers = nn.ModuleList(PackedLayer(layer, config) for layer in _child(hf_encoder, "layer", nn.ModuleList))
        # MPNet: one bias table shared by all layers; other families have no such attribute.
        self.relative_attention_bias = getattr(hf_encoder, "relative_attention_bias", None)
        self._relative_position_bucket = getattr(hf_encoder, "relative_position_bucket", None)
        self._scratch_width = max(3 * config.hidden_size, config.intermediate_size)

    supports = staticmethod(supports)

    def forward(
        self,
        input_ids: torch.Tensor,  # [num_tokens] int64, on the encoder's device
        position_ids: torch.Tensor,  # [num_tokens] int64, restarting at 0 per sequence
        cu_seqlens_cpu: torch.Tensor,  # [num_seqs + 1] int32, on the CPU
        max_seqlen: int,
        token_type_ids: torch.Tensor | None = None,  # [num_tokens] int64; None means all zeros
        *,
        cu_seqlens_dev: torch.Tensor | None = None,  # [num_seqs + 1] int32 on the device; made if None
    ) -> torch.Tensor:  # [num_tokens, hidden]
        """Last hidden state of every token of every packed sequence."""
        hidden = self.embeddings(input_ids, position_ids, token_type_ids)  # [num_tokens, hidden]
        packed = self.packed_pass(hidden, cu_seqlens_cpu, max_seqlen, cu_seqlens_dev)
        for layer in self.layers:
            hidden = layer(hidden, packed)
        return hidden

    def packed_pass(self, hidden: torch.Tensor, cu_seqlens_cpu: torch.Tensor, max_seqlen: int,
                    cu_seqlens_dev: torch.Tensor | None = None) -> _PackedPass:
        """What the layers of one forward over ``hidden`` [num_tokens, hidden] share."""
        return _PackedPass(
            cu_seqlens_cpu, cu_seqlens_cpu.to(hidden.device) if cu_seqlens_dev is None else cu_seqlens_dev, max_seqlen,
            self.position_bias(max_seqlen, hidden.device),
            hidden.new_empty(hidden.shape[0] * self._scratch_width),
            torch.empty_like(hidden),
        )

    def position_bias(self, max_seqlen: int, device: torch.device) -> torch.Tensor | None:
        """MPNet's relative bias for positions 0..max_seqlen-1; it only depends on key - query,
        so every shorter sequence uses its top-left corner."""
        if self.relative_attention_bias is None:
            return None
        if self._relative_position_bucket is None:
            raise ValueError("the encoder has a relative_attention_bias but no relative_position_bucket")
        positions = torch.arange(max_seqlen, device=device)
        relative = positions[None, :] - positions[:, None]  # [max_len, max_len], key - query
        buckets = self._relative_position_bucket(relative, _MPNET_NUM_BUCKETS, _MPNET_MAX_DISTANCE)
        return self.relative_attention_bias(buckets).permute(2, 0, 1)  # [heads, max_len, max_len]
