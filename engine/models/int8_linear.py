"""An int8 GEMM for the packed forward: weights int8 per output channel, prepacked once for
fbgemm (AVX2, AVX-512 and their VNNI int8 dot products), activations quantized per tensor at
run time. SmoothQuant's per-input-channel ``smooth`` moves activation outliers into the
weights, where per-channel scales absorb them: ``x W^T = (x / s) (W s)^T``.

A pure-torch reference of the same arithmetic (``reference``) is what the tests compare with.
"""
from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import torch

from poolq.engine.device.hardware import cpu_flags

# Without VNNI, fbgemm's int8 kernels sum pairs of u8 x s8 products in 16 bits, which 8-bit
# activations can overflow: quantize them to 7 bits there (reduce_range), to 8 bits with VNNI.
_VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


@functools.cache  # /proc/cpuinfo is read once, not once per linear
def activations_need_reduced_range() -> bool:
    return not (_VNNI_FLAGS & cpu_flags())


class Int8Linear:
    """``y = x W^T + b`` with W held int8; inference only, CPU only."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, smooth: torch.Tensor | None = None,
                 reduce_range: bool | None = None) -> None:
        weight = weight.detach().float()  # [out, in]
        if smooth is not None:
            weight = weight * smooth[None, :]
        scales = weight.abs().amax(1).clamp_min(1e-8) / 127  # [out]
        with warnings.catch_warnings():
            # torch 2.13 marks quantized tensors deprecated (pytorch#184982); fbgemm's prepacked
            # dynamic linear, the CPU int8 GEMM it ships, still takes only them.
            warnings.filterwarnings("ignore", message=".*quantize_per_tensor, torch.quantize_per_channel.*")
            self.qweight = torch.quantize_per_channel(weight, scales.double(), torch.zeros(len(scales), dtype=torch.long),
                                                      0, torch.qint8)
        self.bias = None if bias is None else bias.detach().float()
        self.packed = torch.ops.quantized.linear_prepack(self.qweight, self.bias)
        self.inverse_smooth = None if smooth is None else (1.0 / smooth).float()  # [in]
        self.reduce_range = activations_need_reduced_range() if reduce_range is None else reduce_range

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # [T, in] -> [T, out] float32
        if self.inverse_smooth is not None:
            x = x * self.inverse_smooth
        return torch.ops.quantized.linear_dynamic(x, self.packed, self.reduce_range)

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        """The same arithmetic in plain torch: x quantized per tensor (asymmetric uint8, or 7 bits
        under ``reduce_range``), multiplied with the dequantized int8 weight."""
        if self.inverse_smooth is not None:
            x = x * self.inverse_smooth
        levels = 127 if self.reduce_range else 255
        low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
        scale = max(high - low, 1e-8) / levels
        zero = round(-low / scale)
        x_q = torch.clamp(torch.round(x / scale) + zero, 0, levels)
        y = ((x_q - zero) * scale) @ self.qweight.dequantize().t()
        return y if self.bias is None else y + self.bias


@dataclass(frozen=True)
class LayerInt8:
    qkv: Int8Linear
    attn_out: Int8Linear
    ffn_in: Int8Linear
