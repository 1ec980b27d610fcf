"""Adapters that expose an HF model's own classifier as ``[n, hidden] -> [n, num_labels]``.

HF classification heads differ in what they read. Families whose head has its own shape (DeBERTa,
ALBERT, DistilBERT) have an explicit adapter in classifier_families.py; the rest share a common layout:
BERT runs its pooler (dense + tanh on the first token) before a linear layer; RoBERTa/XLM-R/ELECTRA/MPNet
heads read ``features[:, 0]`` of a ``[batch, seq, hidden]`` tensor; ModernBERT runs its prediction head
(dense, activation, norm) before its linear layer; decoders apply a ``score`` linear layer to the last token.
The pooling method picks the token; these adapters feed it to the head as the head expects.
"""
from __future__ import annotations

import torch

from poolq.engine.model_spec import ModelSpecError
from poolq.engine.pooling.heads.classifier_families import FirstTokenReader, family_classifier
from poolq.engine.pooling.heads.classifier_heads import Classifier


def sequence_classifier(model: torch.nn.Module) -> Classifier:
    """The classifier of a loaded ``*ForSequenceClassification`` model: its family's adapter where it has
    one, else the common layout it matches."""
    family = family_classifier(model)
    if family is not None:
        return family
    score = getattr(model, "score", None)
    if isinstance(score, torch.nn.Linear):  # decoders
        return score
    head = getattr(model, "classifier", None)
    if head is None:
        raise ModelSpecError(f"{type(model).__name__} has no classifier or score layer poolq knows")
    pooler = getattr(model.base_model, "pooler", None)
    if isinstance(head, torch.nn.Linear) and pooler is not None:  # BERT: pooler (reads states[:, 0]), then linear
        return torch.nn.Sequential(FirstTokenReader(pooler), head)
    if isinstance(head, torch.nn.Linear):
        return _prediction_head_then(model, head)
    return FirstTokenReader(head)  # RoBERTa-style heads read features[:, 0]


def _prediction_head_then(model: torch.nn.Module, linear: torch.nn.Linear) -> Classifier:
    """``linear``, after the model's prediction head where it has one (ModernBERT: dense, activation and
    norm on the pooled state or on every token, then the classifier)."""
    head = getattr(model, "head", None)
    return torch.nn.Sequential(head, linear) if isinstance(head, torch.nn.Module) else linear


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
