"""Per-family sequence-classifier adapters, for the families whose head no common layout describes.

Each adapter turns the first-token state ``[n, hidden]`` into logits ``[n, num_labels]`` with the model's
own layers, in the order of that family's ``*ForSequenceClassification.forward`` in transformers (dropout
is left out: inference). They are keyed by ``config.model_type``, so a family is matched by name rather
than guessed from which attributes a model happens to have: ALBERT's base model has a ``pooler`` as BERT's
does, but a bare Linear whose tanh is a separate module; DeBERTa's pooler sits on the model, not its base.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from poolq.engine.model_spec import ModelSpecError
from poolq.engine.pooling.heads.classifier_heads import Classifier


class FirstTokenReader(torch.nn.Module):
    """Feeds ``[n, hidden]`` as ``[n, 1, hidden]`` to a layer that picks ``states[:, 0]`` itself
    (RoBERTa-style heads, DeBERTa's ContextPooler). A module, not a closure: precision.py casts a
    head's input to the weights it exposes; the wrapped layer is the model's own (no copy)."""

    def __init__(self, layer: torch.nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.layer(pooled.unsqueeze(1))


def _layer(owner: torch.nn.Module, name: str) -> torch.nn.Module:
    """``owner.name``, or a ModelSpecError naming the class and the missing layer (a checkpoint of the
    family saved without it, or a transformers version that moved it)."""
    layer = getattr(owner, name, None)
    if not isinstance(layer, torch.nn.Module):
        raise ModelSpecError(f"{type(owner).__name__} has no {name} layer; poolq cannot run its classifier")
    return layer


def _deberta(model: torch.nn.Module) -> Classifier:
    # DeBERTa (v1, v2, v3): ContextPooler (dense + activation on the first token), then the linear classifier
    return torch.nn.Sequential(FirstTokenReader(_layer(model, "pooler")), _layer(model, "classifier"))


def _albert(model: torch.nn.Module) -> Classifier:
    # ALBERT: the base model's pooler is a Linear on the first token, its tanh a module beside it
    base = _layer(model, "base_model")
    return torch.nn.Sequential(_layer(base, "pooler"), _layer(base, "pooler_activation"), _layer(model, "classifier"))


def _distilbert(model: torch.nn.Module) -> Classifier:
    # DistilBERT: pre_classifier, ReLU (a call inside forward, no module on the model), then the classifier
    return torch.nn.Sequential(_layer(model, "pre_classifier"), torch.nn.ReLU(), _layer(model, "classifier"))


CLASSIFIER_FAMILIES: Mapping[str, Callable[[torch.nn.Module], Classifier]] = {
    "deberta": _deberta,
    "deberta-v2": _deberta,  # v3 checkpoints (mxbai-rerank-v1, nli-deberta-v3) are deberta-v2 too
    "albert": _albert,
    "distilbert": _distilbert,
}


def family_classifier(model: torch.nn.Module) -> Classifier | None:
    """The classifier adapter of ``model``'s family, or None for a family the common layouts cover."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    adapter = CLASSIFIER_FAMILIES.get(model_type) if isinstance(model_type, str) else None
    return adapter(model) if adapter is not None else None
