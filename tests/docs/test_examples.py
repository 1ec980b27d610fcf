"""Every shell and Python block of README.md and docs/*.md runs as written, against one real dev stack.

How a block runs: the pages in order (README first), each page's blocks in order, each block its own
process (``bash -euo pipefail`` or ``python3``), in a scratch directory the page's blocks share. The
environment is the one README tells a reader to have after ``poolq dev up``: ``POOLQ_API_URL`` and
``POOLQ_API_KEY`` (the stack's dev key), ``POOLQ_DEV_DIR`` (so ``poolq dev status`` and ``poolq keys``
find it), the bucket's keys as ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY``
(what an operator holds), and a ``corpus.jsonl`` of ``{"id", "text"}`` lines (the first demo documents) in the scratch
directory. A block that cannot run here carries ``<!-- not-run: why -->`` right before its fence;
tests/docs/test_markdown.py checks every marker says why.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.dev_stack import REPO_ROOT, dev_stack
from support.markdown_blocks import PYTHON, CodeBlock, code_blocks, documents

pytestmark = pytest.mark.integration

BLOCK_TIMEOUT_S = 120
DEMO_CORPUS = REPO_ROOT / "devtools" / "demo" / "sample_corpus.jsonl"
CORPUS_DOCUMENTS = 3


def _runnable_blocks() -> list[CodeBlock]:
    return [block for path in documents() for block in code_blocks(path) if block.runnable and not block.not_run]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with dev_stack(tmp_path_factory.mktemp("docs-stack")) as info:
        yield info


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """One directory per page, made on its first block and shared by the page's later blocks."""
    made: dict[str, Path] = {}

    def directory(page: str) -> Path:
        if page not in made:
            made[page] = tmp_path_factory.mktemp(page.replace("/", "-"))
            lines = DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[:CORPUS_DOCUMENTS]
            documents = [{"id": record["id"], "text": record["text"][:2000]} for record in map(json.loads, lines)]
            (made[page] / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
        return made[page]

    return directory


def _environment(stack: dict) -> dict:
    interpreter = str(Path(sys.executable).parent)  # python3 and poolq as the tests run them
    return {**os.environ, "PATH": f"{interpreter}{os.pathsep}{os.environ.get('PATH', '')}",
            "POOLQ_API_URL": stack["api_url"], "POOLQ_API_KEY": stack["api_key"], "POOLQ_DEV_DIR": stack["dir"],
            # the bucket's keys, which an operator has: for the pages that read results straight from S3
            "AWS_ENDPOINT_URL": stack["s3_endpoint"], "AWS_ACCESS_KEY_ID": stack["access_key_id"],
            "AWS_SECRET_ACCESS_KEY": stack["secret_access_key"]}


@pytest.mark.parametrize("block", _runnable_blocks(), ids=lambda block: block.name)
def test_example_runs(block: CodeBlock, stack, scratch):
    command = [sys.executable, "-c", block.text] if block.language in PYTHON else \
        ["bash", "-c", "set -euo pipefail\n" + block.text]
    run = subprocess.run(command, cwd=scratch(block.path), env=_environment(stack), capture_output=True, text=True,
                         timeout=BLOCK_TIMEOUT_S)
    report = (f"{block.name} ({block.language}) exited {run.returncode}\n--- block\n{block.text}"
              f"--- stdout\n{run.stdout[-3000:]}\n--- stderr\n{run.stderr[-3000:]}")
    assert run.returncode == 0, report

