"""Classifier heads: logits from the model's own classifier, calibrated, then activated."""
from __future__ import annotations

import numpy as np
import torch

from poolq.engine.pooling.host_block import rows_to_host, tokens_to_host
from poolq.engine.pooling.methods import TokenStates
from poolq.engine.pooling.precision import through
from poolq.engine.pooling.window_combiners import MeanLogits
from poolq.engine.request import PoolingParams

Classifier = torch.nn.Module  # [n, hidden] -> [n, num_labels], in the model's dtype


class Calibration:
    """Standardize logits with a known mean and spread before the activation."""

    def __init__(self, logit_mean: float = 0.0, logit_sigma: float = 1.0) -> None:
        if logit_sigma <= 0:
            raise ValueError(f"logit_sigma must be > 0, got {logit_sigma}")
        self.logit_mean = logit_mean
        self.logit_sigma = logit_sigma

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        return (logits - self.logit_mean) / self.logit_sigma


class ClassifierHead:
    """Pooled ``[num_seqs, hidden]`` -> ``[num_labels]`` per sequence."""

    def __init__(self, classifier: Classifier, activation: torch.nn.Module, calibration: Calibration | None) -> None:
        self.classifier = classifier
        self.activation = activation
        self.calibration = calibration

    def forward(self, pooled: torch.Tensor, params: tuple[PoolingParams, ...]) -> list[np.ndarray]:
        logits = _logits(self.classifier, pooled, self.calibration)  # [num_seqs, num_labels]
        return rows_to_host(logits, [p.activation for p in params], self._activate)

    def _activate(self, logits: torch.Tensor, activate: bool) -> torch.Tensor:
        return self.activation(logits) if activate else logits

    def window_combiner(self, params: PoolingParams) -> MeanLogits:
        return MeanLogits(params, self.activation)


class TokenClassifierHead:
    """Token states -> ``[n_i, num_labels]`` per sequence; STEP may keep only some label columns."""

    def __init__(self, classifier: Classifier, activation: torch.nn.Module, calibration: Calibration | None) -> None:
        self.classifier = classifier
        self.activation = activation
        self.calibration = calibration

    def forward(self, states: TokenStates, params: tuple[PoolingParams, ...]) -> list[np.ndarray]:
        # states: [n_i, hidden] each; a group's tokens go through the classifier as one block
        return tokens_to_host(states, [(p.activation, _columns(p)) for p in params], self._scores)

    def _scores(self, tokens: torch.Tensor, key: tuple[bool, tuple[int, ...] | None]) -> torch.Tensor:
        activate, returned_token_ids = key
        scores = _logits(self.classifier, tokens, self.calibration)  # [n, num_labels]
        scores = self.activation(scores) if activate else scores
        return scores if returned_token_ids is None else scores[:, list(returned_token_ids)]


def _columns(params: PoolingParams) -> tuple[int, ...] | None:
    """The label columns a request keeps, hashable (rows are grouped by them)."""
    return None if params.returned_token_ids is None else tuple(params.returned_token_ids)


def _logits(classifier: Classifier, states: torch.Tensor, calibration: Calibration | None) -> torch.Tensor:
    """float32 logits (calibration and activation follow in float32) from the classifier in its dtype."""
    logits = through(classifier, states)
    return calibration(logits) if calibration is not None else logits
