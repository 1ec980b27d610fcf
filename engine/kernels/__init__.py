"""Optional GPU kernels for the engine's hot paths.

Importing this package is free: it imports neither torch nor triton. Triton is an optional
run-time dependency, so pick the implementation explicitly:

* ``poolq.engine.kernels.segment_pool_ref`` -- pure torch, any device (the CPU path and the test oracle);
* ``poolq.engine.kernels.segment_pool`` -- Triton kernels for CUDA tensors (needs ``triton``).
"""
from __future__ import annotations

import importlib.util


def triton_available() -> bool:
    """Whether ``triton`` is installed, found without importing it."""
    return importlib.util.find_spec("triton") is not None
