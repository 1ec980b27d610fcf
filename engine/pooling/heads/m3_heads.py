"""BGE-M3's extra layers (FlagEmbedding's checkpoint layout): ``sparse_linear.pt`` (hidden -> 1,
a weight per token) and ``colbert_linear.pt`` (hidden -> ColBERT dimension), saved as state
dicts beside the encoder."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from poolq.engine.model_spec import ModelSpecError


@dataclass(frozen=True)
class M3Heads:
    sparse_linear: torch.nn.Linear  # [hidden] -> [1]
    colbert_linear: torch.nn.Linear  # [hidden] -> [colbert_dim]
    unused_token_ids: tuple[int, ...]  # no lexical weight: CLS, EOS, pad, unknown


def load_m3_heads(model_dir: Path, unused_token_ids: tuple[int, ...], device: torch.device, dtype: torch.dtype) -> M3Heads:
    return M3Heads(_linear(model_dir / "sparse_linear.pt", device, dtype),
                   _linear(model_dir / "colbert_linear.pt", device, dtype), unused_token_ids)


def _linear(path: Path, device: torch.device, dtype: torch.dtype) -> torch.nn.Linear:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)  # tensors only: no code from the file runs
        weight = state["weight"]
    except (OSError, RuntimeError, KeyError, TypeError) as exc:
        raise ModelSpecError(f"{path}: not a linear layer's state dict ({type(exc).__name__}: {exc})") from None
    linear = torch.nn.Linear(weight.shape[1], weight.shape[0], bias="bias" in state)
    linear.load_state_dict(state)
    return linear.eval().to(device=device, dtype=dtype)
