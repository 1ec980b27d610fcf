"""The dtype policy of every pooling method and head, declared once; each head goes through these.

* Layers (classifier, projector/Dense, MLM head, BGE-M3's sparse and ColBERT linears) run in the
  model's compute dtype on its device: their input is cast to the layer's own weights (``to_weights``),
  whatever dtype or device the states arrived in (float32 chunk means of late chunking, a bf16 row).
* Sums, normalizations and activations run in float32 (``widen``): a mean over thousands of tokens
  drifts in bf16's 8-bit mantissa, and fp16 squares overflow in an L2 norm.
* Picking rows (CLS, LAST, a token's state) computes nothing, so it keeps the states' dtype.
* An output leaves once, at the end: float32 on the host (``to_host``).

For a float32 model every cast here is the identity, so its outputs are those of the uncast code.
"""
from __future__ import annotations

import numpy as np
import torch

WIDE = torch.float32  # what sums, norms and activations run in, and what outputs are


def to_weights(x: torch.Tensor, layer: torch.nn.Module) -> torch.Tensor:
    """``x`` on ``layer``'s device and in its weights' dtype (unchanged for a layer without weights)."""
    weight = next(layer.parameters(), None)
    return x if weight is None else x.to(device=weight.device, dtype=weight.dtype)


def through(layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)`` in the layer's dtype, widened to float32 for what follows (norms, activations)."""
    return widen(layer(to_weights(x, layer)))


def widen(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32, on its device (a no-op for float32)."""
    return x.to(WIDE)


def to_host(x: torch.Tensor) -> np.ndarray:
    """An output's one copy to the host: a float32 numpy array."""
    return widen(x).cpu().numpy()
