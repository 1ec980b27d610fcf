"""The roofline beside every tokens/s: the machine's GEMM peak in a compute dtype, measured on a
matmul shaped like an encoder's FFN, and the model FLOPs utilisation (MFU) of a run.

MFU = model FLOPs of the corpus (``encoder_flops``: linear layers and attention, from the model's
shapes and each sequence's real length) / seconds / the peak. It says how much of what the
machine's GEMMs do in that dtype the whole forward reaches; the rest is the passes between the
GEMMs (softmax, LayerNorm, GELU, copies), the attention's small GEMMs, tokenizing and pooling.
"""
from __future__ import annotations

import statistics
import time

# MiniLM's FFN in: 4096 tokens (a step's worth) x hidden 384 -> intermediate 1536.
GEMM_SHAPE = (4096, 384, 1536)


def gemm_flops(shape: tuple[int, int, int] = GEMM_SHAPE) -> float:
    """Multiply-adds x 2 of an ``[m, k] x [k, n]`` matmul."""
    m, k, n = shape
    return 2.0 * m * k * n


def measure_gemm_peak(dtype: str, device: str = "cpu", shape: tuple[int, int, int] = GEMM_SHAPE,
                      repeats: int = 7) -> float:
    """Median GFLOP/s of the ``shape`` matmul in ``dtype`` (torch's threads); int8 times a dynamic
    int8 Linear (fbgemm: the kernels poolq's int8 path runs, activation quantization included)."""
    import torch

    run = _int8_gemm(shape) if dtype == "int8" else _float_gemm(shape, getattr(torch, dtype), device)
    run()  # warm-up: first-call kernel selection, page faults
    times = []
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        run()
        _synchronize(device)
        times.append(time.perf_counter() - start)
    return gemm_flops(shape) / statistics.median(times) / 1e9


def encoder_flops(config, seq_lens: list[int]) -> float:
    """Forward FLOPs of a BERT-shaped encoder over sequences of ``seq_lens`` tokens (no padding):
    per layer and token, the Q, K, V and output projections (4 h^2 multiply-adds) and the FFN
    (2 h f); per layer and sequence of n tokens, QK^T and AV (n^2 h each). Embeddings, LayerNorm,
    softmax, GELU and pooling are left out: they are not GEMMs."""
    hidden, ffn, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    tokens = sum(seq_lens)
    linear = 2 * tokens * (4 * hidden * hidden + 2 * hidden * ffn)
    attention = 2 * 2 * hidden * sum(n * n for n in seq_lens)
    return float(layers * (linear + attention))


def mfu(flops: float, seconds: float, peak_gflops: float | None) -> float | None:
    """Model FLOPs utilisation; None where no peak was measured."""
    if not peak_gflops or seconds <= 0:
        return None
    return flops / seconds / (peak_gflops * 1e9)


def _float_gemm(shape: tuple[int, int, int], dtype, device: str):
    import torch

    m, k, n = shape
    a, b = torch.randn(m, k, device=device, dtype=dtype), torch.randn(k, n, device=device, dtype=dtype)
    return lambda: torch.mm(a, b)


def _int8_gemm(shape: tuple[int, int, int]):
    """The engine's own int8 GEMM (fbgemm's prepacked dynamic linear, with its reduce_range rule)."""
    import torch

    from poolq.engine.models.int8_linear import Int8Linear

    m, k, n = shape
    linear = Int8Linear(torch.randn(n, k), torch.randn(n))
    x = torch.randn(m, k)
    return lambda: linear(x)


def _synchronize(device: str) -> None:
    if device != "cpu":
        import torch

        torch.cuda.synchronize()
