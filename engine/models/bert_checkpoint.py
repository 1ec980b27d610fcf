"""A BERT-family base encoder read straight from its checkpoint, without transformers' modeling code.

Why: importing transformers' modeling classes (``modeling_utils``) costs about 2 CPU-seconds in every
process, because it pulls in ``torch._dynamo`` and ``torch.distributed.tensor``; loading the 22M
all-MiniLM-L6-v2 weights costs a tenth of that. A worker that embeds with a BERT, RoBERTa or
XLM-RoBERTa encoder needs none of it: :class:`~poolq.engine.models.packed_bert.PackedBertEncoder`
runs the forward itself and only borrows the modules' parameters.

So this builds the same module tree HF builds, under HF's attribute names (``embeddings.word_embeddings``,
``encoder.layer[i].attention.self.query``, ...), and loads ``model.safetensors`` into it by key.
Whatever it does not cover exactly (another family or activation, relative positions, a ``.bin``
checkpoint, a key it cannot find) makes :func:`checkpoint_encoder` return None, and the caller loads the
model with transformers as before: the two paths give the same parameters, so the same outputs.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

# model_type -> the prefix its weights carry when saved from a model with a head (BertForMaskedLM: "bert.").
_BASE_PREFIXES = {"bert": "bert.", "roberta": "roberta.", "xlm-roberta": "roberta."}
# hidden_act -> the module HF's ACT2FN builds for it (the same torch functions).
_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "gelu": nn.GELU,
    "gelu_pytorch_tanh": partial(nn.GELU, approximate="tanh"),
    "relu": nn.ReLU,
}
WEIGHTS_NAME = "model.safetensors"


def covers(config: Any) -> bool:
    """Whether ``config`` (a transformers config) describes an encoder this reader builds exactly."""
    return (
        getattr(config, "model_type", None) in _BASE_PREFIXES
        and getattr(config, "position_embedding_type", "absolute") == "absolute"
        and getattr(config, "hidden_act", None) in _ACTIVATIONS
        and not getattr(config, "is_decoder", False)
        and not getattr(config, "add_cross_attention", False)
    )


def checkpoint_encoder(model_dir: Path, config: Any, dtype: torch.dtype) -> nn.Module | None:
    """The base encoder of ``model_dir`` in ``dtype``, in eval mode; None where this reader does not
    cover the model (see the module docstring), so the caller loads it with transformers."""
    weights = model_dir / WEIGHTS_NAME
    if not (covers(config) and weights.is_file()):
        return None
    from safetensors.torch import load_file

    encoder = BertSkeleton(config)
    state = _base_state(load_file(str(weights)), _BASE_PREFIXES[config.model_type])
    expected = encoder.state_dict().keys()
    if not expected <= state.keys():
        return None
    encoder.load_state_dict({name: state[name] for name in expected}, strict=True, assign=True)
    return encoder.to(dtype).eval()


def _base_state(state: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors under base-model names: a head model's ``bert.`` prefix removed."""
    return {name.removeprefix(prefix): tensor for name, tensor in state.items()}


# Parameters left uninitialized: the checkpoint replaces every one (load_state_dict(assign=True)), so a
# random init would be wasted work, seconds for a 250k-token vocabulary. (Building on the meta device
# instead would import torch._dynamo for the init's reference kernels, the cost this file avoids.)
class _Linear(nn.Linear):
    def reset_parameters(self) -> None:
        pass


class _Embedding(nn.Embedding):
    def reset_parameters(self) -> None:
        pass


class BertEmbeddings(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.word_embeddings = _Embedding(config.vocab_size, hidden, padding_idx=config.pad_token_id)
        self.position_embeddings = _Embedding(config.max_position_embeddings, hidden)
        self.token_type_embeddings = _Embedding(config.type_vocab_size, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.padding_idx = config.pad_token_id  # RoBERTa-style positions count from here (HF's attribute)


class _SelfAttention(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.query, self.key, self.value = _Linear(hidden, hidden), _Linear(hidden, hidden), _Linear(hidden, hidden)


class _DenseNorm(nn.Module):
    """HF's ``*Output`` blocks: a dense layer, then LayerNorm over it plus the residual."""

    def __init__(self, width_in: int, hidden: int, eps: float) -> None:
        super().__init__()
        self.dense = _Linear(width_in, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)


class _Attention(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        self.self = _SelfAttention(config.hidden_size)
        self.output = _DenseNorm(config.hidden_size, config.hidden_size, config.layer_norm_eps)


class _Intermediate(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        self.dense = _Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = _ACTIVATIONS[config.hidden_act]()


class _Layer(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        self.attention = _Attention(config)
        self.intermediate = _Intermediate(config)
        self.output = _DenseNorm(config.intermediate_size, config.hidden_size, config.layer_norm_eps)


class _Encoder(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        self.layer = nn.ModuleList(_Layer(config) for _ in range(config.num_hidden_layers))


class BertSkeleton(nn.Module):
    """HF's ``BertModel`` module tree without its pooler or forward: parameters to be run packed."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = _Encoder(config)
