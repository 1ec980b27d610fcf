"""Classifier heads: logits from the model's own classifier, calibrated, then activated."""
from __future__ import annotations

import numpy as np
import torch

from poolq.engine.pooling.methods import TokenStates
from poolq.engine.pooling.precision import through, to_host
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
        return [
            to_host(self.activation(row) if p.activation else row) for row, p in zip(logits, params)
        ]

    def window_combiner(self, params: PoolingParams) -> MeanLogits:
        return MeanLogits(params, self.activation)


class TokenClassifierHead:
    """Token states -> ``[n_i, num_labels]`` per sequence; STEP may keep only some label columns."""

    def __init__(self, classifier: Classifier, activation: torch.nn.Module, calibration: Calibration | None) -> None:
        self.classifier = classifier
        self.activation = activation
        self.calibration = calibration

    def forward(self, states: TokenStates, params: tuple[PoolingParams, ...]) -> list[np.ndarray]:
        out = []
        for tokens, p in zip(states, params):
            scores = _logits(self.classifier, tokens, self.calibration)  # [n, num_labels]
            scores = self.activation(scores) if p.activation else scores
            if p.returned_token_ids is not None:
                scores = scores[:, list(p.returned_token_ids)]
            out.append(to_host(scores))
        return out


def _logits(classifier: Classifier, states: torch.Tensor, calibration: Calibration | None) -> torch.Tensor:
    """float32 logits (calibration and activation follow in float32) from the classifier in its dtype."""
    logits = through(classifier, states)
    return calibration(logits) if calibration is not None else logits
