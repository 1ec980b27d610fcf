"""Experimental (``EngineConfig.fuse_norms``, off by default): the bias add and LayerNorm after
each layer's attention-output and FFN-output GEMMs as one inductor-compiled kernel.

Eager torch reads and writes the ``[num_tokens, hidden]`` sum twice there (``add_(bias)``, then
LayerNorm's statistics and its normalized write); inductor fuses them into one pass. The GEMMs stay
eager (oneDNN's), and so does attention. Compiled once per process with dynamic token counts
(tens of seconds on a small CPU: a worker pays it at its first shard, or at warm-up).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import cache

import torch
import torch.nn.functional as F
from torch import nn

from poolq.engine.models.packed_bert import PackedBertEncoder, PackedLayer


def _bias_layer_norm(summed: torch.Tensor, bias: torch.Tensor, weight: torch.Tensor, norm_bias: torch.Tensor,
                     eps: float) -> torch.Tensor:
    return F.layer_norm(summed + bias, (summed.shape[-1],), weight, norm_bias, eps)


@cache
def _compiled() -> Callable[..., torch.Tensor]:
    return torch.compile(_bias_layer_norm, dynamic=True)


def fused_bias_norm(summed: torch.Tensor, bias: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    """``norm(summed + bias)`` in one compiled pass."""
    return _compiled()(summed, bias, norm.weight, norm.bias, norm.eps)


def fuse_norms(encoder: PackedBertEncoder) -> None:
    """Every layer of ``encoder`` ends its dense parts with the fused bias + LayerNorm."""
    for layer in encoder.layers:
        if isinstance(layer, PackedLayer):
            layer.bias_norm = fused_bias_norm
