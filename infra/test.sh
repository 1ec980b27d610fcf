#!/usr/bin/env bash
# Install poolq with its dev extras, then run the whole test suite (unit + integration).
# torch is pinned first so pip never resolves a multi-GB CUDA build on a CPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -e '.[dev]'
python3 -m pytest "$@"
