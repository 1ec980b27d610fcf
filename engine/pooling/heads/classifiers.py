"""Adapters that expose an HF model's own classifier as ``[n, hidden] -> [n, num_labels]``.

HF classification heads differ in what they read: BERT runs its pooler (dense + tanh on the
first token) before a linear layer; RoBERTa/XLM-R/MPNet heads read ``features[:, 0]`` of a
``[batch, seq, hidden]`` tensor; ModernBERT runs its prediction head (dense, activation, norm) before
its linear layer; decoders apply a ``score`` linear layer to the last token.
The pooling method picks the token; these adapters feed it to the head as the head expects.
"""
from __future__ import annotations

import torch

from poolq.engine.model_spec import ModelSpecError
from poolq.engine.pooling.heads.classifier_heads import Classifier


def sequence_classifier(model: torch.nn.Module) -> Classifier:
    """The classifier of a loaded ``*ForSequenceClassification`` model."""
    score = getattr(model, "score", None)
    if isinstance(score, torch.nn.Linear):  # decoders
        return score
    head = getattr(model, "classifier", None)
    if head is None:
        raise ModelSpecError(f"{type(model).__name__} has no classifier or score layer poolq knows")
    pooler = getattr(model.base_model, "pooler", None)
    if isinstance(head, torch.nn.Linear) and pooler is not None:  # BERT: pooler, then linear
        return _PoolerThenLinear(pooler, head)
    if isinstance(head, torch.nn.Linear):
        return _prediction_head_then(model, head)
    return _FirstTokenHead(head)  # RoBERTa-style heads read features[:, 0]


def _prediction_head_then(model: torch.nn.Module, linear: torch.nn.Linear) -> Classifier:
    """``linear``, after the model's prediction head where it has one (ModernBERT: dense, activation and
    norm on the pooled state or on every token, then the classifier)."""
    head = getattr(model, "head", None)
    return torch.nn.Sequential(head, linear) if isinstance(head, torch.nn.Module) else linear


# Modules, not closures: a head casts its input to the classifier's weights (precision.py), so the
# adapter must expose them; the wrapped layers are the model's own (no copy).
class _PoolerThenLinear(torch.nn.Module):
    def __init__(self, pooler: torch.nn.Module, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.pooler, self.linear = pooler, linear

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.linear(self.pooler(pooled.unsqueeze(1)))


class _FirstTokenHead(torch.nn.Module):
    def __init__(self, head: torch.nn.Module) -> None:
        super().__init__()
        self.head = head

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.head(pooled.unsqueeze(1))


def token_classifier(model: torch.nn.Module) -> Classifier:
    """The per-token classifier of a loaded ``*ForTokenClassification`` model."""
    for name in ("classifier", "score"):
        layer = getattr(model, name, None)
        if isinstance(layer, torch.nn.Linear):
            return _prediction_head_then(model, layer)
    raise ModelSpecError(f"{type(model).__name__} has no token classifier layer poolq knows")


def masked_lm_head(model: torch.nn.Module) -> torch.nn.Module:
    """The MLM head (transform + vocabulary projection) of a loaded ``*ForMaskedLM`` model."""
    for name in ("cls", "lm_head"):
        head = getattr(model, name, None)
        if isinstance(head, torch.nn.Module):
            return head
    raise ModelSpecError(f"{type(model).__name__} has no masked-LM head poolq knows")
