"""Builds a model's dispatcher once, at load time, from what its directory declares."""
from __future__ import annotations

import torch

from poolq.engine.model_spec import ModelKind, ModelSpec, PoolingType
from poolq.engine.pooling.dispatcher import PoolerDispatcher
from poolq.engine.pooling.heads.activation import resolve_activation
from poolq.engine.pooling.heads.classifier_heads import Calibration, ClassifierHead, TokenClassifierHead
from poolq.engine.pooling.heads.classifiers import masked_lm_head, sequence_classifier, token_classifier
from poolq.engine.pooling.heads.m3_heads import M3Heads
from poolq.engine.pooling.heads.sparse_head import SparseHead
from poolq.engine.pooling.heads.task_heads import EmbeddingHead, TokenEmbeddingHead
from poolq.engine.pooling.m3_poolers import AllTokensWithIds, ColbertHead, TokenWeightSparseHead
from poolq.engine.pooling.methods import AllPool, PoolingMethod, StepPool, pooling_method
from poolq.engine.pooling.pooler import Pooler
from poolq.engine.pooling.prompt_excluded import excluding_prompt
from poolq.engine.request import PoolingTask


def build_dispatcher(
    spec: ModelSpec,
    model: torch.nn.Module,
    projector: torch.nn.Module | None,
    calibration: Calibration | None = None,
    m3: M3Heads | None = None,
) -> PoolerDispatcher:
    """The poolers for every task ``spec.kind`` serves; ``m3``: BGE-M3's extra layers (an M3 encoder only)."""
    if spec.kind is ModelKind.M3_ENCODER:
        if m3 is None:
            raise ValueError("a BGE-M3 model needs its sparse and ColBERT layers")
        return PoolerDispatcher({
            PoolingTask.EMBED: Pooler(_embed_method(spec), EmbeddingHead(projector, spec.normalize)),
            PoolingTask.SPARSE_EMBED: Pooler(AllTokensWithIds(), TokenWeightSparseHead(m3.sparse_linear, m3.unused_token_ids)),
            PoolingTask.TOKEN_EMBED: Pooler(AllPool(), ColbertHead(m3.colbert_linear)),
        })
    if spec.kind is ModelKind.ENCODER:
        return PoolerDispatcher({
            PoolingTask.EMBED: Pooler(_embed_method(spec), EmbeddingHead(projector, spec.normalize)),
            PoolingTask.TOKEN_EMBED: Pooler(AllPool(), TokenEmbeddingHead(projector, spec.normalize)),
        })
    activation = resolve_activation(spec.problem_type, spec.activation_fn, spec.num_labels)
    if spec.kind is ModelKind.SEQUENCE_CLASSIFIER:
        # Classifiers read the first token (encoders) or the last (decoders), whatever 1_Pooling says.
        method = pooling_method(_classifier_pooling(spec, model))
        head = ClassifierHead(sequence_classifier(model), activation, calibration)
        return PoolerDispatcher({PoolingTask.CLASSIFY: Pooler(method, head)})
    if spec.kind is ModelKind.TOKEN_CLASSIFIER:
        token_head = TokenClassifierHead(token_classifier(model), activation, calibration)
        return PoolerDispatcher({PoolingTask.TOKEN_CLASSIFY: Pooler(StepPool(), token_head)})
    sparse = SparseHead(masked_lm_head(model), spec.sparse_reduce)
    return PoolerDispatcher({PoolingTask.SPARSE_EMBED: Pooler(AllPool(), sparse)})


def _embed_method(spec: ModelSpec) -> PoolingMethod:
    """The embed pooling; a model that pools without its prompt (include_prompt=False) leaves it out."""
    method = pooling_method(spec.pooling)
    return method if spec.include_prompt else excluding_prompt(method)


def _classifier_pooling(spec: ModelSpec, model: torch.nn.Module) -> PoolingType:
    """What a sequence classifier reads: the last token (decoders), else the first, or the mean where the
    model's config says so (ModernBERT's ``classifier_pooling: mean``)."""
    if spec.is_causal:
        return PoolingType.LAST
    mean = getattr(getattr(model, "config", None), "classifier_pooling", "cls") == "mean"
    return PoolingType.MEAN if mean else PoolingType.CLS
