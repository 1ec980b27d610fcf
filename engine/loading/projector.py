"""sentence-transformers ``Dense`` modules (projectors) loaded from a model directory."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from poolq.engine.model_spec import ModelSpecError
from poolq.engine.pooling.heads.activation import load_torch_module


def load_projector(model_dir: Path, dense_dirs: tuple[str, ...]) -> torch.nn.Sequential | None:
    """The model's Dense layers in order (linear + activation each), or None if it has none."""
    if not dense_dirs:
        return None
    layers: list[torch.nn.Module] = []
    for dense_dir in dense_dirs:
        layers += _load_dense(model_dir / dense_dir)
    return torch.nn.Sequential(*layers).eval()


def _load_dense(path: Path) -> list[torch.nn.Module]:
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    linear = torch.nn.Linear(config["in_features"], config["out_features"], bias=config.get("bias", True))
    state = _load_weights(path)
    linear.load_state_dict({key.removeprefix("linear."): value for key, value in state.items()})
    # sentence-transformers' Dense defaults to Tanh when its config names no activation (and writes
    # "torch.nn.modules.linear.Identity" for none at all), so an absent key means Tanh, as it loads it.
    activation = config.get("activation_function", "torch.nn.modules.activation.Tanh") or "torch.nn.modules.linear.Identity"
    return [linear, load_torch_module(activation)]


def _load_weights(path: Path) -> dict[str, torch.Tensor]:
    if (path / "model.safetensors").exists():
        from safetensors.torch import load_file

        return load_file(str(path / "model.safetensors"))
    if (path / "pytorch_model.bin").exists():
        return torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise ModelSpecError(f"{path}: Dense module without model.safetensors or pytorch_model.bin")
