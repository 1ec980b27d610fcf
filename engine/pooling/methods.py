"""Pooling methods: which token states represent a sequence, and how they are combined.

Sequence methods (CLS, LAST, MEAN) return ``[num_seqs, hidden]`` float32; token methods
(ALL, STEP) return one ``[n_i, hidden]`` tensor per sequence.
"""
from __future__ import annotations

import torch

from poolq.engine.model_spec import PoolingType
from poolq.engine.pooling.metadata import PoolingMetadata

TokenStates = list[torch.Tensor]  # one [n_i, hidden] per sequence


class PoolingMethod:
    """Base class: ``forward(hidden [num_tokens, hidden], meta)``."""

    returns_tokens = False

    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> torch.Tensor | TokenStates:
        raise NotImplementedError


class CLSPool(PoolingMethod):
    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> torch.Tensor:
        return hidden_states[meta.starts_cpu.to(hidden_states.device)].float()  # [num_seqs, hidden]


class LastPool(PoolingMethod):
    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> torch.Tensor:
        return hidden_states[meta.ends_cpu.to(hidden_states.device) - 1].float()  # [num_seqs, hidden]


class MeanPool(PoolingMethod):
    """Span means accumulated in fp32.

    Each span is reduced on its own with an fp32 accumulator, so the only temporary is one
    ``[hidden]`` row: no fp32 copy of the whole ``[num_tokens, hidden]`` block. On CUDA the
    Triton span-mean kernel does the same in one launch.
    """

    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> torch.Tensor:
        if hidden_states.is_cuda:
            from poolq.engine.kernels.segment_pool import span_mean

            device = hidden_states.device
            return span_mean(hidden_states, meta.starts_cpu.to(device, torch.int32), meta.ends_cpu.to(device, torch.int32))
        out = torch.empty(meta.num_seqs, hidden_states.shape[1], dtype=torch.float32)  # [num_seqs, hidden]
        for row, (start, end) in enumerate(meta.spans()):
            torch.sum(hidden_states[start:end], dim=0, dtype=torch.float32, out=out[row])
            out[row].div_(max(end - start, 1))
        return out


class AllPool(PoolingMethod):
    """Every token's state."""

    returns_tokens = True

    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> TokenStates:
        return [hidden_states[start:end] for start, end in meta.spans()]


class StepPool(PoolingMethod):
    """The states at step-tag tokens (``params.step_tag_id``), or all tokens if none is set."""

    returns_tokens = True

    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> TokenStates:
        states = []
        for (start, end), params in zip(meta.spans(), meta.params):
            tokens = hidden_states[start:end]  # [n, hidden]
            if params.step_tag_id is not None:
                tokens = tokens[meta.input_ids[start:end] == params.step_tag_id]
            states.append(tokens)
        return states


_SEQUENCE_METHODS: dict[PoolingType, type[PoolingMethod]] = {
    PoolingType.CLS: CLSPool,
    PoolingType.LAST: LastPool,
    PoolingType.MEAN: MeanPool,
}


def pooling_method(pooling: PoolingType) -> PoolingMethod:
    """The sequence-level method for a pooling type."""
    return _SEQUENCE_METHODS[pooling]()
