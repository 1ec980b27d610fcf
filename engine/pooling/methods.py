"""Pooling methods: which token states represent a sequence, and how they are combined.

Sequence methods (CLS, LAST, MEAN) return ``[num_seqs, hidden]``; token methods (ALL, STEP) return
one ``[n_i, hidden]`` tensor per sequence. Dtypes follow precision.py: what picks rows (CLS, LAST,
ALL, STEP) keeps the states' dtype, MEAN sums in float32; heads cast to their layers' weights.
"""
from __future__ import annotations

import torch

from poolq.engine.model_spec import PoolingType
from poolq.engine.pooling.host_block import group_rows
from poolq.engine.pooling.metadata import PoolingMetadata
from poolq.engine.pooling.precision import WIDE

TokenStates = list[torch.Tensor]  # one [n_i, hidden] per sequence


class PoolingMethod:
    """Base class: ``forward(hidden [num_tokens, hidden], meta)``."""

    returns_tokens = False

    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> torch.Tensor | TokenStates:
        raise NotImplementedError


class CLSPool(PoolingMethod):
    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> torch.Tensor:
        return hidden_states[meta.starts_cpu.to(hidden_states.device)]  # [num_seqs, hidden]


class LastPool(PoolingMethod):
    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> torch.Tensor:
        return hidden_states[meta.ends_cpu.to(hidden_states.device) - 1]  # [num_seqs, hidden]


class MeanPool(PoolingMethod):
    """Span means accumulated in fp32, on the states' device.

    On CUDA the Triton span-mean kernel reduces every span in one launch. On the CPU the spans of
    one length are summed as one ``[rows, length, hidden]`` block (a view where they lie back to
    back): that sum is bit-identical to summing each span alone, for float32 and bf16 states alike,
    where a ragged reduction (``index_add_``, ``segment_reduce``, cumsum differences) adds in another
    order and is not. The sum widens its input to fp32 first, so blocks hold at most ``_WIDE_VALUES``
    values: never an fp32 copy of the whole ``[num_tokens, hidden]`` block.
    """

    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> torch.Tensor:
        if hidden_states.is_cuda:
            from poolq.engine.kernels.segment_pool import span_mean

            device = hidden_states.device
            return span_mean(hidden_states, meta.starts_cpu.to(device, torch.int32), meta.ends_cpu.to(device, torch.int32))
        spans = meta.spans()
        out = torch.empty(len(spans), hidden_states.shape[1], dtype=WIDE, device=hidden_states.device)  # [num_seqs, hidden]
        for length, rows in group_rows([end - start for start, end in spans]).items():
            per_block = max(_WIDE_VALUES // max(length * hidden_states.shape[1], 1), 1)
            for first in range(0, len(rows), per_block):
                block_rows = rows[first : first + per_block]
                block = _spans_of_length(hidden_states, [spans[row][0] for row in block_rows], length)
                means = block.sum(1, dtype=WIDE).div_(max(length, 1))
                if len(block_rows) == len(spans):  # one block holds every row, in order (rows keep their order)
                    return means
                out[block_rows] = means
        return out


# Token-state values one CPU mean block holds (the sum's fp32 copy of a bf16 block: 64 MiB).
_WIDE_VALUES = 1 << 24


def _spans_of_length(hidden_states: torch.Tensor, starts: list[int], length: int) -> torch.Tensor:
    """``[len(starts), length, hidden]``: a view of spans that lie back to back, else a gathered copy
    in the states' dtype."""
    first = starts[0]
    if length == 0 or starts == list(range(first, first + length * len(starts), length)):
        return hidden_states[first : first + length * len(starts)].unflatten(0, (len(starts), length))
    index = torch.tensor(starts, device=hidden_states.device).unsqueeze(1) + torch.arange(length, device=hidden_states.device)
    return hidden_states[index]


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


class WeightedMeanPool(PoolingMethod):
    """Position-weighted mean (sentence-transformers' weightedmean, SGPT), in float32: token ``i`` of a
    sequence (from 0) weighs ``i + 1``. The first ``params.skip_tokens`` tokens (a prompt the model pools
    without) are left out and the others keep their weights, as sentence-transformers leaves them out."""

    def forward(self, hidden_states: torch.Tensor, meta: PoolingMetadata) -> torch.Tensor:
        out = torch.zeros(meta.num_seqs, hidden_states.shape[1], dtype=WIDE, device=hidden_states.device)  # [num_seqs, hidden]
        for row, ((start, end), params) in enumerate(zip(meta.spans(), meta.params)):
            first = min(params.skip_tokens, end - start)
            weights = torch.arange(first + 1, end - start + 1, dtype=WIDE, device=hidden_states.device)  # [n]
            if len(weights):  # one window's tokens widened at a time, never the whole block
                out[row] = (hidden_states[start + first : end].to(WIDE) * weights.unsqueeze(1)).sum(0) / weights.sum()
        return out


_SEQUENCE_METHODS: dict[PoolingType, type[PoolingMethod]] = {
    PoolingType.CLS: CLSPool,
    PoolingType.LAST: LastPool,
    PoolingType.MEAN: MeanPool,
    PoolingType.WEIGHTEDMEAN: WeightedMeanPool,
}


def pooling_method(pooling: PoolingType) -> PoolingMethod:
    """The sequence-level method for a pooling type."""
    return _SEQUENCE_METHODS[pooling]()
