"""The int8 GEMM (fbgemm, prepacked) against its pure-torch reference, and against float32."""
import pytest
import torch

from poolq.engine.models.int8_linear import Int8Linear, activations_need_reduced_range

# 8-bit activations are exact only with VNNI: elsewhere fbgemm's 16-bit pair sums saturate on them
# (an error of ~3 where the reference's is ~0.2, seen on AVX2), which is why the range is chosen by CPU.
FULL_RANGE = pytest.param(False, marks=pytest.mark.skipif(activations_need_reduced_range(),
                                                          reason="this CPU has no VNNI: 7-bit activations here"))


@pytest.mark.parametrize("reduce_range", [True, FULL_RANGE, None])  # None: chosen from the CPU's flags
@pytest.mark.parametrize("smoothed", [False, True])
def test_int8_linear_equals_its_reference(reduce_range, smoothed):
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(96, 64, generator=generator) * 0.05
    bias = torch.randn(96, generator=generator)
    x = torch.randn(37, 64, generator=generator)
    x[:, 5] *= 30  # an outlier channel, as LayerNorm outputs have
    smooth = x.abs().amax(0) ** 0.8 / weight.abs().amax(0) ** 0.2 if smoothed else None
    linear = Int8Linear(weight, bias, smooth, reduce_range=reduce_range)
    fast, reference = linear(x), linear.reference(x)
    # Same quantization grid; the kernel may round a value to the next step, never further.
    step = float((x / (smooth if smoothed else 1)).abs().max()) * 2 / (127 if linear.reduce_range else 255)
    assert torch.allclose(fast, reference, atol=step * float(weight.abs().sum(1).max()) / 50 + 1e-4)
    exact = x @ weight.t() + bias
    cosine = torch.nn.functional.cosine_similarity(fast, exact)
    assert cosine.min() > (0.995 if smoothed else 0.97)


def test_smoothing_helps_an_outlier_channel():
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(64, 64, generator=generator) * 0.05
    x = torch.randn(200, 64, generator=generator)
    x[:, 3] *= 60
    exact = x @ weight.t()
    plain = Int8Linear(weight, None, reduce_range=True)(x)
    smooth = x.abs().amax(0) ** 0.8 / weight.abs().amax(0) ** 0.2
    smoothed = Int8Linear(weight, None, smooth, reduce_range=True)(x)
    error = lambda y: float((y - exact).norm() / exact.norm())  # noqa: E731
    assert error(smoothed) < error(plain) / 2
