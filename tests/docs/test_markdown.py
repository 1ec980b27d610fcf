"""README.md and docs/*.md parse as their authors meant under CommonMark (markdown-it-py): every fence
opens and closes a block and names its language, and every not-run marker says why."""
import pytest
from support.markdown_blocks import REPO_ROOT, broken_links, code_blocks, code_blocks_in, documents, markdown_problems

# README.md's lines 34-38 up to commit 9157064: line 37 began with ``` and text, which closes nothing
# (a closing fence takes no text after it), so the block went on to the next fence and the sections
# after it rendered as code.
STRAY_FENCE = """Day to day, the fast lane:

```bash
python3 -m pytest -m "not integration and not slow"
``` `torch==2.13.0` is installed first on purpose: it is

## What the demo does

```bash
poolq demo
```
"""


def test_the_check_finds_a_stray_fence():
    problems = markdown_problems(STRAY_FENCE, "README.md")
    assert any(p.startswith("README.md:5: a stray fence") for p in problems), problems


def test_the_check_finds_an_unclosed_fence_and_a_marker_without_a_reason():
    text = "<!-- not-run: -->\n```bash\necho hi\n```\n\n```python\nprint(1)\n"
    problems = markdown_problems(text, "x.md")
    assert any("x.md:1: a not-run marker must say why" in p for p in problems), problems
    assert any("x.md:6: the fence opened here is never closed" in p for p in problems), problems


def test_a_clean_page_has_no_problems():
    text = "# t\n\n<!-- not-run: needs a GPU -->\n```bash\nnvidia-smi\n```\n\n```text\na -> b\n```\n"
    assert markdown_problems(text, "ok.md") == []
    [gpu, picture] = code_blocks_in(text, "ok.md")
    assert (gpu.not_run, gpu.runnable, picture.runnable) == ("needs a GPU", True, False)


@pytest.mark.parametrize("path", documents(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_readme_and_docs_parse_as_meant(path):
    assert markdown_problems(path.read_text(encoding="utf-8"), path.relative_to(REPO_ROOT).as_posix()) == []


@pytest.mark.parametrize("path", documents(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_every_relative_link_reaches_its_page_and_heading(path):
    assert broken_links(path) == []


def test_the_link_check_finds_a_missing_page_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Deadlines and `retries`\n\n[a](#deadlines-and-retries) [b](#nope) [c](gone.md) [d](page.md#nope)\n")
    assert broken_links(page) == ["page.md:3: #nope: no heading #nope in page.md", "page.md:3: gone.md: no such file",
                                  "page.md:3: page.md#nope: no heading #nope in page.md"]


def test_readme_is_short_and_shows_each_way_in_a_block_that_runs():
    readme = REPO_ROOT / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= 250  # the reference lives in docs/
    run = [block.text for block in code_blocks(readme) if block.runnable and not block.not_run]
    for way in ("curl ", "poolq submit", "from poolq import Client", "import openai", "from poolq import PoolingEngine",
                "import pyarrow", "import duckdb"):
        assert any(way in text for text in run), way
