#!/usr/bin/env bash
# Lint and type-check: ruff over the whole tree, mypy over every package (configured in pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m ruff check .
# mypy finds modules by their folders, so it sees the tree as it installs: poolq/engine, poolq/storage, ...
# (a link to the repository named poolq; the editable install's import hook is invisible to mypy).
view="$(mktemp -d)"
trap 'rm -rf "$view"' EXIT
ln -s "$PWD" "$view/poolq"
MYPYPATH="$view" python3 -m mypy --cache-dir "$PWD/.poolq/mypy-cache"
