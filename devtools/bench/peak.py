"""The machine's measured square-matmul throughput (the model FLOPs a corpus costs: roofline.py)."""
from __future__ import annotations

import statistics
import time


def measure_matmul_gflops(size: int = 2048, repeats: int = 5, device: str = "cpu", dtype: str = "float32") -> float:
    """Median GFLOP/s of a ``size``³ matmul in ``dtype`` on ``device`` (CPU: torch's threads)."""
    import torch

    if device != "cpu":
        size = max(size, 8192)  # a GPU needs a large problem to reach its peak
    a = torch.randn(size, size, device=device, dtype=getattr(torch, dtype))
    b = torch.randn(size, size, device=device, dtype=getattr(torch, dtype))
    torch.mm(a, b)  # warm-up
    times = []
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        torch.mm(a, b)
        _synchronize(device)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times) / 1e9


def _synchronize(device: str) -> None:
    if device != "cpu":
        import torch

        torch.cuda.synchronize()
