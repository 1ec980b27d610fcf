"""What the packed forwards of RoPE models share: the step layout and the loaded model's own rotary code.

Rotary cos/sin come from the HF model's ``rotary_emb`` module, called on the packed position ids
(restarting at 0 per sequence, as each sequence alone would count them), and are applied by the
``apply_rotary_pos_emb`` of the model's own modeling module: frequencies, ``rope_scaling`` and
dtype handling are transformers' own, shared rather than re-derived.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

# Rope types whose frequencies depend on the length of the call (and on the module's history):
# a packed call would see the batch's longest sequence, not each sequence's own, so such models
# keep the padded path, which is transformers' own forward.
_LENGTH_DEPENDENT_ROPE = frozenset({"dynamic", "longrope"})

RotaryFunction = Callable[..., tuple[torch.Tensor, torch.Tensor]]
RopeKey = str | None  # the layer type of models with one rope per layer type (Gemma3, ModernBERT); None: one rope


def static_rope(rotary_emb: object) -> bool:
    """Whether ``rotary_emb`` (an HF rotary module) gives every position the same cos/sin whatever
    the length of the call, so one call can serve all packed sequences."""
    kinds = getattr(rotary_emb, "rope_type", None)
    if kinds is None:
        return False
    return not _LENGTH_DEPENDENT_ROPE & set(kinds.values() if isinstance(kinds, dict) else [kinds])


def rotary_function(attention: nn.Module) -> RotaryFunction:
    """``apply_rotary_pos_emb`` of the modeling module that defines ``attention``'s class."""
    module = inspect.getmodule(type(attention))
    rotate = getattr(module, "apply_rotary_pos_emb", None)
    if not callable(rotate):
        raise ValueError(f"{type(attention).__module__} has no apply_rotary_pos_emb; no packed forward for it")
    return rotate


@dataclass(frozen=True)
class RopeStep:
    """What every layer of one packed forward shares: the batch layout and cos/sin per rope kind."""

    cu_seqlens_cpu: torch.Tensor  # [num_seqs + 1] int32, CPU
    cu_seqlens_dev: torch.Tensor  # [num_seqs + 1] int32, on the model's device
    max_seqlen: int
    rope: dict[RopeKey, tuple[torch.Tensor, torch.Tensor]]  # key -> (cos, sin), each [num_tokens, rotary_dim]

    @classmethod
    def build(cls, rotary_emb: nn.Module, keys: Iterable[RopeKey], hidden: torch.Tensor, position_ids: torch.Tensor,
              cu_seqlens_cpu: torch.Tensor, max_seqlen: int, cu_seqlens_dev: torch.Tensor | None) -> "RopeStep":
        """``hidden`` [num_tokens, hidden] gives the device and dtype of cos/sin, as in transformers."""
        positions = position_ids[None]  # [1, num_tokens]: one row, as a batch of one
        rope = {}
        for key in set(keys):
            cos, sin = rotary_emb(hidden, positions) if key is None else rotary_emb(hidden, positions, key)
            rope[key] = (cos[0], sin[0])  # [num_tokens, rotary_dim]
        dev = cu_seqlens_cpu.to(hidden.device) if cu_seqlens_dev is None else cu_seqlens_dev
        return cls(cu_seqlens_cpu, dev, max_seqlen, rope)
