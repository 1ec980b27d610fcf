"""Triton segment pooling (run in the Triton interpreter, see conftest) against the pure-torch reference.

Shapes stay tiny: the interpreter costs milliseconds per tile per program. Inputs sit inside larger
NaN-filled buffers, so a missing load mask shows up as a non-finite or wrong output.
"""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed (optional at run time)")

from poolq.engine.kernels import segment_pool as sp  # noqa: E402  (after the skip)
from poolq.engine.kernels import segment_pool_ref as ref  # noqa: E402

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
KERNELS = {"mean": sp.segment_mean, "first": sp.segment_first, "last": sp.segment_last}
REFS = {"mean": ref.segment_mean_ref, "first": ref.segment_first_ref, "last": ref.segment_last_ref}
SMALL = sp.LaunchConfig(block_t=8, block_h=32)  # H=40 -> column blocks 32 + 8; 13 rows -> 2 row tiles
LENGTHS = (0, 1, 5, 2, 13)  # empty, single, odd, even, several row tiles


def _cu(lengths) -> torch.Tensor:
    """cu_seqlens [len(lengths) + 1] int32 for these segment lengths."""
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def _values(num_tokens: int, hidden: int, dtype, seed: int = 0) -> torch.Tensor:
    """Random [num_tokens, hidden] values, already rounded to dtype."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(num_tokens, hidden, generator=gen).to(dtype)


def _in_nan_buffer(values: torch.Tensor, layout: str) -> torch.Tensor:
    """A view equal to ``values`` [T, H] inside a larger NaN buffer, with the given memory layout."""
    t, h = values.shape
    nan = float("nan")
    if layout == "contiguous":  # NaN rows before and after, unit strides
        return _fill(torch.full(((t + 3) * h,), nan, dtype=values.dtype)[h:(t + 1) * h].view(t, h), values)
    if layout == "padded_rows":  # row stride h + 5, NaN columns at both sides
        return _fill(torch.full((t + 4, h + 5), nan, dtype=values.dtype)[2:2 + t, 3:3 + h], values)
    if layout == "transposed":  # column-major: strides (1, t + 3)
        return _fill(torch.full((h + 2, t + 3), nan, dtype=values.dtype)[1:1 + h, 2:2 + t].t(), values)
    if layout == "every_other_column":  # stride on the hidden dim is 2, NaN in between
        return _fill(torch.full((t + 2, 2 * h + 3), nan, dtype=values.dtype)[1:1 + t, 1:1 + 2 * h:2], values)
    raise AssertionError(layout)


def _fill(view: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    view.copy_(values)
    return view


def _assert_close(out: torch.Tensor, expected: torch.Tensor) -> None:
    assert out.dtype == torch.float32 and out.shape == expected.shape
    assert torch.isfinite(out).all(), "non-finite output: a load read outside its mask"
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("normalize", [False, True], ids=["raw", "l2"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mode", ["mean", "first", "last"])
def test_kernel_matches_reference(mode, dtype, normalize):
    cu = _cu(LENGTHS)
    hidden = _in_nan_buffer(_values(int(cu[-1]), 40, dtype), "padded_rows")  # [26, 40]
    out = KERNELS[mode](hidden, cu, normalize, config=SMALL)
    _assert_close(out, REFS[mode](hidden, cu, normalize))
    assert (out[0] == 0).all(), "an empty segment pools to zeros"


@pytest.mark.parametrize("layout", ["contiguous", "padded_rows", "transposed", "every_other_column"])
def test_strided_views(layout):
    cu = _cu((3, 0, 9))
    hidden = _in_nan_buffer(_values(12, 40, torch.bfloat16, seed=1), layout)  # [12, 40]
    for mode in ("mean", "last"):
        _assert_close(KERNELS[mode](hidden, cu, True, config=SMALL), REFS[mode](hidden, cu, True))


@pytest.mark.parametrize("normalize", [False, True], ids=["raw", "l2"])
def test_default_config_with_hidden_not_a_multiple_of_the_block(normalize):
    cu = _cu((7, 1, 0))
    hidden = _in_nan_buffer(_values(8, 300, torch.float16, seed=2), "contiguous")  # 300 = 256 + 44
    assert sp.default_config(300, "mean").block_h == 256
    _assert_close(sp.segment_mean(hidden, cu, normalize), ref.segment_mean_ref(hidden, cu, normalize))


def test_span_mean_with_overlaps_gaps_and_any_order():
    values = _values(20, 24, torch.float32, seed=3)
    values[[0, 9, 10, 19]] = float("nan")  # rows no span covers
    hidden = _in_nan_buffer(values, "padded_rows")  # [20, 24]
    offsets = torch.tensor([-7, 11, 1, 4, 5, 8, 18, 11, 99, -7, 19, 9, 9, 5, 9, 19, 12, 99], dtype=torch.int32)
    starts, ends = offsets[1:8], offsets[10:17]  # views with junk around them
    out = sp.span_mean(hidden, starts, ends, config=sp.LaunchConfig(block_t=8, block_h=16))
    _assert_close(out, ref.span_mean_ref(hidden, starts, ends))
    _assert_close(out[1], values[1:9].mean(0))


def test_chunk_offsets_need_not_cover_all_tokens():
    values = _values(16, 24, torch.float16, seed=4)
    values[:3] = float("nan")  # before the first chunk
    values[14:] = float("nan")  # after the last chunk
    hidden = _in_nan_buffer(values, "contiguous")
    chunks = torch.tensor([3, 7, 11, 14], dtype=torch.int32)  # chunk offsets into one document's tokens
    out = sp.segment_mean(hidden, chunks, normalize=True, config=SMALL)
    _assert_close(out, ref.segment_mean_ref(hidden, chunks, normalize=True))


def test_sums_accumulate_in_fp32():
    hidden = torch.full((6, 16), 60000.0, dtype=torch.float16)  # the fp16 sum of 6 rows would overflow
    out = sp.segment_mean(hidden, _cu((6,)))
    _assert_close(out, torch.full((1, 16), 60000.0))


def test_zero_rows_stay_zero_when_normalized():
    hidden = torch.zeros(5, 24)
    cu = _cu((0, 2, 3))
    for mode in ("mean", "first", "last"):
        out = KERNELS[mode](hidden, cu, True, config=SMALL)
        assert torch.equal(out, torch.zeros(3, 24))


@pytest.mark.parametrize("num_tokens, hidden_size, lengths", [(4, 8, ()), (0, 8, (0, 0)), (3, 0, (1, 2))],
                         ids=["no segments", "no tokens", "no columns"])
def test_degenerate_shapes(num_tokens, hidden_size, lengths):
    hidden, cu = torch.randn(num_tokens, hidden_size), _cu(lengths)
    for mode in ("mean", "first", "last"):
        out = KERNELS[mode](hidden, cu, True)
        assert torch.equal(out, REFS[mode](hidden, cu, True))
        assert torch.equal(out, torch.zeros(len(lengths), hidden_size))


def test_validate_false_skips_only_value_checks():
    hidden, cu = _values(5, 16, torch.float32), _cu((2, 3))
    _assert_close(sp.segment_mean(hidden, cu, validate=False), ref.segment_mean_ref(hidden, cu))
    with pytest.raises(ValueError, match="int32"):
        sp.segment_mean(hidden, cu.long(), validate=False)


I32 = torch.int32
BAD_CALLS = {
    "3-D hidden": (lambda: sp.segment_mean(torch.zeros(2, 3, 4), _cu((2,))), "2-D tensor"),
    "int hidden": (lambda: sp.segment_mean(torch.zeros(2, 4, dtype=torch.int32), _cu((2,))), "float32, float16"),
    "int64 offsets": (lambda: sp.segment_mean(torch.zeros(2, 4), torch.tensor([0, 2])), "cu_seqlens must be int32"),
    "2-D offsets": (lambda: sp.segment_first(torch.zeros(2, 4), torch.zeros(1, 2, dtype=I32)), "1-D"),
    "empty offsets": (lambda: sp.segment_last(torch.zeros(2, 4), torch.zeros(0, dtype=I32)), "num_segments \\+ 1"),
    "decreasing": (lambda: sp.segment_mean(torch.zeros(4, 4), torch.tensor([0, 3, 2], dtype=I32)), "segment 1 is \\[3, 2\\)"),
    "past the end": (lambda: sp.segment_mean(torch.zeros(4, 4), torch.tensor([0, 5], dtype=I32)), "num_tokens \\(4\\)"),
    "negative start": (lambda: sp.span_mean(torch.zeros(4, 4), torch.tensor([-1], dtype=I32),
                                            torch.tensor([2], dtype=I32)), "segment 0 is \\[-1, 2\\)"),
    "length mismatch": (lambda: sp.span_mean(torch.zeros(4, 4), torch.zeros(2, dtype=I32),
                                             torch.zeros(3, dtype=I32)), "same length"),
    "device mismatch": (lambda: sp.segment_mean(torch.zeros(4, 4), torch.zeros(2, dtype=I32, device="meta")),
                        "is on meta but hidden is on cpu"),
    "bad block": (lambda: sp.LaunchConfig(block_t=3, block_h=16), "power of two"),
    "bad mode": (lambda: ref.span_pool_ref(torch.zeros(2, 4), torch.zeros(1, dtype=I32),
                                           torch.ones(1, dtype=I32), mode="max"), "mode must be one of"),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_inputs_raise_value_error(case):
    call, message = BAD_CALLS[case]
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("mode", ["mean", "first", "last"])
def test_reference_matches_a_plain_loop(mode):
    hidden, lengths = _values(21, 8, torch.bfloat16, seed=5), (4, 0, 1, 16)
    cu = _cu(lengths).tolist()
    rows = {"mean": slice(None), "first": slice(0, 1), "last": slice(-1, None)}[mode]
    expected = torch.stack([hidden[s:e][rows].float().mean(0) if e > s else torch.zeros(8)
                            for s, e in zip(cu[:-1], cu[1:])])
    torch.testing.assert_close(REFS[mode](hidden, _cu(lengths)), expected)
    torch.testing.assert_close(REFS[mode](hidden, _cu(lengths), True),
                               torch.nn.functional.normalize(expected, dim=1))
