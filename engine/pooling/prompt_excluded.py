"""Sequence pooling that leaves each window's prompt out: sentence-transformers' include_prompt=False
(INSTRUCTOR-style models), for the models whose Pooling config says so.

The planner puts how many leading tokens sentence-transformers counts as the prompt's (its
``prompt_length``: the special tokens before the text and the prompt's) into ``params.skip_tokens``.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from poolq.engine.pooling.metadata import PoolingMetadata
from poolq.engine.pooling.methods import PoolingMethod, WeightedMeanPool


class PromptExcluded(PoolingMethod):
    """``method`` over each sequence from its ``params.skip_tokens``-th token on: CLS takes the first
    token after the prompt, MEAN averages the tokens after it, LAST still takes the last. A sequence the
    skip would leave empty is pooled whole (sentence-transformers' CLS then takes its first token)."""

    def __init__(self, method: PoolingMethod) -> None:
        self.method = method

    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> torch.Tensor | list[torch.Tensor]:
        skips = torch.tensor([params.skip_tokens for params in meta.params], dtype=torch.long)  # [num_seqs]
        if not bool(skips.any()):
            return self.method.forward(hidden_states, meta)
        shifted = meta.starts_cpu + skips
        starts = torch.where(shifted < meta.ends_cpu, shifted, meta.starts_cpu)
        return self.method.forward(hidden_states, replace(meta, starts_cpu=starts))


def excluding_prompt(method: PoolingMethod) -> PoolingMethod:
    """``method`` leaving out each sequence's first ``params.skip_tokens`` tokens (the weighted mean does
    so itself: its weights follow the tokens' positions in the whole sequence)."""
    return method if isinstance(method, WeightedMeanPool) else PromptExcluded(method)
