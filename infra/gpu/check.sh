#!/usr/bin/env bash
# GPU correctness + timing check (an NVIDIA GPU and a CUDA build of torch, 2.11 or newer).
# Not part of CI: CI has no GPU. Prints a short table; exits non-zero on a correctness failure.
#
# Installs nothing: the GPU machine has no network, and pip must never resolve a torch there.
# It needs the machine's python3 with torch, numpy, tokenizers, transformers, safetensors,
# sentence-transformers and triton (check.py names any that is missing), and MiniLM: the
# packaged model where poolq is installed, else what `python3 infra/gpu/prepare.py` wrote here
# beforehand under .poolq/gpu-carry (carry that path with the call).
set -euo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
exec python3 infra/gpu/check.py "$@"
