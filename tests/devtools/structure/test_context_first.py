"""ctx first (devtools/structure/context_first.py): the scan on a small tree written here, then the rule
held over the real one."""
from __future__ import annotations

from pathlib import Path

import pytest

from poolq.devtools.structure.context_first import misplaced_contexts
from poolq.devtools.structure.product_tree import PRODUCT_ROOT

STEPS = '''\
def submit(spec, ctx):
    return spec


def bound(ctx, spec):
    return spec


class Records:
    def __init__(self, layout, ctx):
        self.layout = layout

    def read(self, ctx, name):
        return name

    @classmethod
    def open(cls, ctx):
        return cls(None, ctx)


async def estimate(spec, *, ctx):
    return spec


def no_context(spec, context):
    return spec
'''


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_the_scan_names_each_function_whose_ctx_is_not_first_and_skips_tests(tmp_path):
    _write(tmp_path / "jobs" / "steps.py", STEPS)
    _write(tmp_path / "jobs" / "tests" / "test_steps.py", "def test_submit(tmp_path, ctx):\n    pass\n")
    _write(tmp_path / ".poolq" / "stored.py", "def stored(spec, ctx):\n    pass\n")

    assert misplaced_contexts(tmp_path) == ["jobs/steps.py:1 submit", "jobs/steps.py:10 __init__", "jobs/steps.py:21 estimate"]


def test_a_file_that_does_not_parse_is_an_error_naming_it(tmp_path):
    _write(tmp_path / "jobs" / "broken.py", "def submit(spec, ctx:\n")

    with pytest.raises(SyntaxError) as failed:
        misplaced_contexts(tmp_path)
    assert failed.value.filename == str(tmp_path / "jobs" / "broken.py")


def test_every_function_of_the_product_takes_ctx_first():
    assert misplaced_contexts(PRODUCT_ROOT) == []
