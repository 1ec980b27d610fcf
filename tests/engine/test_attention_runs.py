"""Consecutive packed sequences of one length (the windows of a long document) attend in one
batched SDPA call, with the same numbers, bit for bit, as one call per sequence."""
from unittest.mock import patch

import pytest
import torch
import torch.nn.functional as F

from poolq.engine.attention import equal_length_runs, varlen_attention

LENGTHS = [5, 9, 9, 9, 3, 9, 12, 12]
SDPA = F.scaled_dot_product_attention  # runs: 5, 9 x3, 3, 9, 12 x2


def _cu_seqlens(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def test_runs_are_consecutive_sequences_of_one_length():
    assert equal_length_runs(_cu_seqlens(LENGTHS).tolist()) == [(0, 5, 1), (5, 9, 3), (32, 3, 1), (35, 9, 1),
                                                               (44, 12, 2)]
    assert equal_length_runs([0]) == []


def _one_call_per_sequence(q, k, v, lengths: list[int], **options) -> torch.Tensor:
    bounds = _cu_seqlens(lengths).tolist()
    return torch.cat([varlen_attention(q[s:e], k[s:e], v[s:e], _cu_seqlens([e - s]), None, e - s, **options)
                      for s, e in zip(bounds[:-1], bounds[1:])])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("options", [{}, {"causal": True}, {"window": 4}, {"causal": True, "window": 2},
                                     {"scale": 0.3}, {"bias": True}, {"gqa": True}])
def test_a_run_is_one_batched_call_with_the_same_bits(dtype, options, monkeypatch):
    # Given packed sequences with runs of equal lengths, on a CPU whose bf16 attention is SDPA's (AMX)
    monkeypatch.setattr("poolq.engine.attention.explicit_bf16_attention_cpu", lambda: False)
    torch.manual_seed(0)
    options = dict(options)
    kv_heads = 2 if options.pop("gqa", False) else 4
    q = torch.randn(sum(LENGTHS), 4, 16).to(dtype)
    k, v = (torch.randn(sum(LENGTHS), kv_heads, 16).to(dtype) for _ in range(2))
    if options.pop("bias", False):
        options["position_bias"] = torch.randn(4, 12, 12).to(dtype)  # MPNet's relative bias
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[0].shape[0])  # the batch of sequences in this call
        return SDPA(*args, **kwargs)

    # When they attend packed
    cu_seqlens = _cu_seqlens(LENGTHS)
    with patch("poolq.engine.attention.F.scaled_dot_product_attention", counted):
        packed = varlen_attention(q, k, v, cu_seqlens, None, max(LENGTHS), **options)
    # Then each run took one call (per window block: 9 and 12 tokens with a window of 2 or 4 are one block
    # each, WINDOW_BLOCK being larger), and the bits are those of one call per sequence
    assert calls == [1, 3, 1, 1, 2]
    assert torch.equal(packed, _one_call_per_sequence(q, k, v, LENGTHS, **options))


def test_the_explicit_bf16_path_keeps_one_sequence_per_call(monkeypatch):
    # AVX-512-BF16 without AMX: scores are materialized per call, so a run is not batched
    monkeypatch.setattr("poolq.engine.attention.explicit_bf16_attention_cpu", lambda: True)
    q, k, v = torch.randn(sum(LENGTHS), 3, 4, 16).to(torch.bfloat16).unbind(1)
    batches = []

    def counted(q, *args):
        batches.append(q.shape[0])
        return torch.zeros_like(q)

    with patch("poolq.engine.attention._explicit_attention", counted):
        varlen_attention(q, k, v, _cu_seqlens(LENGTHS), None, max(LENGTHS))
    assert batches == [1] * len(LENGTHS)
