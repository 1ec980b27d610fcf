"""Kernel tests run the Triton kernels on CPU tensors in the Triton interpreter.

TRITON_INTERPRET=1 must be in the environment before ``@triton.jit`` runs, i.e. before
``poolq.engine.kernels.segment_pool`` is first imported, so it is set here, ahead of every test module
in this directory. It is process-wide from here on; CI can equally set it in the environment.
"""
from __future__ import annotations

import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # silences triton 3.9's "unset" warning

import pytest

# Without triton, each test module skips itself (pytest.importorskip at its top): a skip raised here
# would crash a run started as `pytest tests/engine/kernels`, where this conftest loads at startup.
_early = sys.modules.get("poolq.engine.kernels.segment_pool")
if _early is not None and type(_early._span_pool_kernel).__name__ != "InterpretedFunction":
    raise pytest.UsageError(
        "poolq.engine.kernels.segment_pool was imported before TRITON_INTERPRET=1 was set, so its kernels "
        "were compiled for a GPU; set TRITON_INTERPRET=1 in the test environment"
    )
