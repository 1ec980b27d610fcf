"""varlen_attention's causal, sliding-window, grouped K/V (GQA) and scaled cases against the float64 formula."""
import pytest
import torch
from support.packed_models import cu_seqlens

from poolq.engine.attention import WINDOW_BLOCK, varlen_attention, varlen_attention_reference

# Lengths 1 up to past two query blocks, so windowed sequences run as several blocks.
LENGTHS = [1, 7, 33, 2 * WINDOW_BLOCK + 45, 9]


def _qkv(heads: int, kv_heads: int, dtype=torch.float32):
    torch.manual_seed(0)
    num_tokens = sum(LENGTHS)
    q = torch.randn(num_tokens, heads, 16).to(dtype)
    kv = torch.randn(num_tokens, 2, kv_heads, 16).to(dtype)  # one tensor: K and V are strided views
    return q, *kv.unbind(1)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [None, 0, 5, 300])
@pytest.mark.parametrize("kv_heads", [2, 1])  # equal heads: test_packed_bert.py
def test_windows_causality_and_grouped_heads_match_the_float64_formula(causal, window, kv_heads):
    # Given packed sequences, some far longer than the window, with 4 query heads over kv_heads K/V heads
    q, k, v = _qkv(4, kv_heads)
    cu = cu_seqlens(LENGTHS)
    # When attention runs packed with a custom scale
    out = varlen_attention(q, k, v, cu, cu, max(LENGTHS), causal=causal, window=window, scale=0.3)
    # Then every query saw exactly the keys of its sequence within the window (and before it, if causal)
    ref = varlen_attention_reference(q, k, v, cu, causal=causal, window=window, scale=0.3)
    torch.testing.assert_close(out.double(), ref, atol=5e-6, rtol=0)  # float32 sums over up to 557 keys


def test_the_window_and_the_grouping_change_the_result():
    # The oracle itself is not blind to them (else the test above would pass for any window)
    q, k, v = _qkv(4, 2)
    cu = cu_seqlens(LENGTHS)
    full = varlen_attention_reference(q, k, v, cu)
    assert (varlen_attention_reference(q, k, v, cu, window=5) - full).abs().max() > 0.1
    repeated = k.repeat(1, 2, 1), v.repeat(1, 2, 1)  # heads 0,1,0,1: not transformers' repeat_kv order
    assert (varlen_attention_reference(q, *repeated, cu) - full).abs().max() > 0.1


@pytest.mark.parametrize("causal", [False, True])
def test_a_window_with_mpnet_bias_masks_the_bias_too(causal):
    q, k, v = _qkv(4, 4)
    bias = torch.randn(4, max(LENGTHS), max(LENGTHS))
    cu = cu_seqlens(LENGTHS)
    out = varlen_attention(q, k, v, cu, None, max(LENGTHS), causal=causal, window=6, position_bias=bias)
    ref = varlen_attention_reference(q, k, v, cu, causal=causal, window=6, position_bias=bias)
    torch.testing.assert_close(out.double(), ref, atol=5e-6, rtol=0)  # float32 sums over up to 557 keys


@pytest.mark.parametrize("explicit", [False, True])
def test_bfloat16_windows_and_grouped_heads_stay_near_the_formula(explicit, monkeypatch):
    # bf16 takes two GEMMs and a softmax on CPUs with AVX-512-BF16 and no AMX, SDPA elsewhere: both paths
    monkeypatch.setattr("poolq.engine.attention.explicit_bf16_attention_cpu", lambda: explicit)
    q, k, v = _qkv(4, 2, torch.bfloat16)
    cu = cu_seqlens(LENGTHS)
    for causal, window in [(True, None), (False, 5), (True, 5)]:
        out = varlen_attention(q, k, v, cu, None, max(LENGTHS), causal=causal, window=window)
        ref = varlen_attention_reference(q, k, v, cu, causal=causal, window=window)
        assert out.dtype == torch.bfloat16 and (out.double() - ref).abs().max() < 0.05


def test_mismatched_heads_and_negative_windows_are_refused_by_name():
    q, k, v = _qkv(4, 4)
    cu = cu_seqlens(LENGTHS)
    with pytest.raises(ValueError, match="4 query heads cannot share 3 key"):
        varlen_attention(q, k[:, :3], v[:, :3], cu, None, max(LENGTHS))
    with pytest.raises(ValueError, match="window must be >= 0"):
        varlen_attention(q, k, v, cu, None, max(LENGTHS), window=-1)
