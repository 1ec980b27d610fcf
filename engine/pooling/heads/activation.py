"""Which activation turns a classifier's logits into outputs, decided once at load time."""
from __future__ import annotations

import importlib

import torch

from poolq.engine.model_spec import ModelSpecError

# Only activations from torch.nn's own modules may be named by a model directory: the name
# comes from a file we did not write, and importing arbitrary dotted paths would run its code.
_ALLOWED_PREFIX = "torch.nn.modules."


class Softmax(torch.nn.Module):
    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits, dim=-1)


def resolve_activation(problem_type: str | None, st_activation: str | None, num_labels: int) -> torch.nn.Module:
    """HF ``problem_type`` first, then sentence-transformers' ``activation_fn``, then by label count."""
    if problem_type == "regression":
        return torch.nn.Identity()
    if problem_type == "single_label_classification":
        return Softmax()
    if problem_type == "multi_label_classification":
        return torch.nn.Sigmoid()
    if st_activation:
        return load_torch_module(st_activation)
    return torch.nn.Sigmoid() if num_labels == 1 else Softmax()


def load_torch_module(dotted: str) -> torch.nn.Module:
    if not dotted.startswith(_ALLOWED_PREFIX):
        raise ModelSpecError(f"activation_fn {dotted!r} is not allowed: only {_ALLOWED_PREFIX}* classes are loaded")
    module_name, _, class_name = dotted.rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise ModelSpecError(f"activation_fn {dotted!r} is not a torch.nn.Module class")
    return cls()
