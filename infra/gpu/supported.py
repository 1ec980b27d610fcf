"""The one supported GPU stack: the torch, CUDA and Triton versions a GPU worker runs, stated here once.

The worker image (infra/docker/worker.Dockerfile) installs exactly these, compose and Kubernetes run
that image with the compute dtype ``auto``, docs/operations.md states them for an install by hand,
and the GPU check (check.py) prints them beside what the machine it runs on has (it runs on another
torch too, saying so: the GPU machine lent to this project's sessions has its own image).
``tests/infra/test_gpu_stack_consistency.py`` fails when any of them disagrees with this file.

Why these: torch 2.13.0 is what the test suite runs (its CPU build); PyPI's torch 2.13.0 wheel for
Linux x86-64 is built for CUDA 13.0 (it requires ``cuda-toolkit==13.0.3`` and cuDNN 9.20 as pip
wheels, so an image needs no CUDA of its own, only an NVIDIA driver of the 580 series or later)
and pins ``triton==3.7.1``: that pin is the Triton a CUDA torch 2.13.0 can be installed with.
(pyproject's dev extra pins Triton 3.9.0 for the CPU suite, whose kernel tests run in Triton's
interpreter and compile ahead of time for sm_80/sm_90: a CPU torch pins no Triton.)
"""
from __future__ import annotations

TORCH = "2.13.0"
CUDA = "13.0"  # the CUDA runtime PyPI's torch 2.13.0 wheel is built for (cuda-toolkit 13.0.3)
TRITON = "3.7.1"  # what that wheel pins
PYTHON = "3.12"  # the worker image's
MIN_DRIVER = 580  # CUDA 13.0's minimum NVIDIA driver branch (Linux)
BASE_IMAGE = f"python:{PYTHON}-slim"
# The pip line of the worker image: PyPI's Linux wheel of this torch is its CUDA build.
PIP_INSTALL = f"pip install --no-cache-dir torch=={TORCH} triton=={TRITON}"
# The compute dtype a GPU worker runs with: bf16 from Ampere on, fp16 before (engine/device/hardware.py).
DTYPE = "auto"
