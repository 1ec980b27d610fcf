# GPU worker: poolq's engine on CUDA, consuming the `control` and `gpu` queues.
# Build from the repository root:  docker build -f infra/docker/worker.Dockerfile -t poolq-worker .
# The one supported GPU stack, stated in infra/gpu/supported.py (tests/infra/test_gpu_stack_consistency.py
# holds this file to it): Python 3.12, torch 2.13.0 as PyPI ships it for Linux x86-64, built for CUDA 13.0
# (its CUDA libraries come as pip wheels: the host needs an NVIDIA driver of the 580 series or later),
# with the Triton that wheel pins.
FROM python:3.12-slim

WORKDIR /app
RUN pip install --no-cache-dir torch==2.13.0 triton==3.7.1
COPY pyproject.toml setup.py README.md __init__.py ./
COPY engine engine
COPY storage storage
COPY jobs jobs
COPY products products
COPY worker worker
COPY devtools devtools
COPY api api
# torch is installed above; the range in pyproject.toml accepts it, so pip keeps it.
RUN pip install --no-cache-dir .

# Models load from installed wheels or mounted directories, never from a hub. The compute dtype is
# auto: bfloat16 on Ampere and later GPUs, float16 before them (engine/device/hardware.py).
ENV HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    POOLQ_DEVICE=cuda \
    POOLQ_COMPUTE_DTYPE=auto
# One worker per GPU of the container (here: the one it was given).
CMD ["poolq", "worker", "--gpus", "0"]
