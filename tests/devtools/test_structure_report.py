"""The structure report (devtools/structure/, ``python -m poolq.devtools.structure_report``): each measure on a
small tree written here, whose numbers are known by construction, then once over the real tree."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from poolq.devtools.structure.call_walk import WalkError, count_returns, walk_calls
from poolq.devtools.structure.import_rules import FLOORS, PACKAGES
from poolq.devtools.structure.name_repeats import repeats_folder
from poolq.devtools.structure.product_tree import PRODUCT_ROOT, read_tree
from poolq.devtools.structure.render import as_json, as_markdown
from poolq.devtools.structure.report import build_report
from poolq.devtools.structure.symbols import SymbolIndex
from poolq.devtools.structure_report import main

FLOW = '''\
from poolq.engine.low import helper
from poolq.jobs.model.thing import Thing


def start(thing: Thing) -> None:
    helper()
    thing.run()
    made = Thing()
    made.size
    list(map(_local, []))


def _local(item: int) -> int:
    return helper()
'''
THING = '''\
class Thing:
    def __init__(self) -> None:
        self.count = 0

    def run(self) -> None:
        self._inner()

    def _inner(self) -> None:
        return None

    @property
    def size(self) -> int:
        return self.count
'''
# path -> (text, lines it is padded to with comments); empty files have no lines
TREE = {
    "engine/__init__.py": ("", 0),
    "engine/low.py": ("def helper() -> int:\n    return 1\n", 320),
    "engine/upward.py": ("import poolq.jobs.model.thing\n", 20),  # engine may import no other package
    **{f"engine/many/m{number:02}.py": ("", 0) for number in range(16)},  # one module over the limit of 15
    "jobs/__init__.py": ("", 0),
    "jobs/model/__init__.py": ("", 0),
    "jobs/model/spec.py": ("from poolq.jobs.steps.submit import submit\n", 20),  # model is below steps: upward
    "jobs/model/thing.py": (THING, 20),
    "jobs/steps/__init__.py": ("", 0),
    "jobs/steps/submit.py": ("def submit() -> None:\n    return None\n", 20),
    "jobs/steps/a.py": ("import poolq.jobs.steps.b\n", 20),  # a and b: a loop at run time
    "jobs/steps/b.py": ("from poolq.jobs.steps import a\n", 20),
    # c and d: a loop only the type checker sees
    "jobs/steps/c.py": ("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import poolq.jobs.steps.d\n", 20),
    "jobs/steps/d.py": ("import poolq.jobs.steps.c\n", 20),
    "jobs/steps/flow.py": (FLOW, 20),
    "jobs/steps/step_helpers.py": ("", 0),  # repeats its folder's name
}
SMALL_FLOORS = {"jobs": (("model",), ("steps",))}


def _write(root: Path) -> Path:
    for relative, (text, lines) in TREE.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        padding = lines - len(text.splitlines())
        path.write_text(text + "".join(f"# {number}\n" for number in range(padding)), encoding="utf-8")
    return root


@pytest.fixture
def small(tmp_path):
    return build_report(_write(tmp_path), ("engine", "jobs"), walks=(("flow", "poolq.jobs.steps.flow:start"),),
                        concepts=("step",), floors=SMALL_FLOORS)


def test_lines_and_shares_per_package_and_per_folder_of_jobs(small):
    sizes = small.sizes
    assert (sizes.total_lines, sizes.files) == (500, len(TREE))
    assert [(share.name, share.lines, share.percent) for share in sizes.packages] == [("engine", 340, 68.0), ("jobs", 160, 32.0)]
    assert [(room.name, room.lines, room.percent, room.percent_of_package) for room in sizes.rooms] == [
        ("jobs/steps", 120, 24.0, 75.0), ("jobs/model", 40, 8.0, 25.0), ("jobs/*.py", 0, 0.0, 0.0)]


def test_modules_per_folder_and_long_files(small):
    folders = {folder.folder: (folder.modules, folder.over_limit) for folder in small.sizes.folders}
    assert folders == {"engine": (2, False), "engine/many": (16, True), "jobs": (0, False), "jobs/model": (2, False),
                       "jobs/steps": (7, False)}
    assert [(long.path, long.lines) for long in small.sizes.long_files] == [("engine/low.py", 320)]


def test_an_upward_import_between_floors_and_between_packages_is_found(small):
    imports = small.imports
    assert imports.floor_violations == {"jobs": ("poolq.jobs.model.spec (floor 0) -> poolq.jobs.steps.submit (floor 1)",)}
    assert imports.package_violations == ("engine/upward.py imports jobs",)
    assert imports.upward_imports == 2


def test_import_cycles_at_run_time_and_with_type_checking_imports(small):
    imports = small.imports
    assert imports.cycles == (("poolq.jobs.steps.a", "poolq.jobs.steps.b"),)
    assert imports.cycles_with_type_checking == (("poolq.jobs.steps.a", "poolq.jobs.steps.b"),
                                                 ("poolq.jobs.steps.c", "poolq.jobs.steps.d"))
    # b.py's `from poolq.jobs.steps import a` imports the package (its __init__) and a: two pairs
    assert (imports.module_edges, imports.typing_only_edges) == (9, 1)
    assert [(edge.source, edge.target, edge.imports) for edge in imports.folder_edges] == [
        ("engine", "jobs/model", 1), ("jobs/model", "jobs/steps", 1), ("jobs/steps", "engine", 1),
        ("jobs/steps", "jobs/model", 1)]


def test_concepts_outside_their_folder_and_names_that_repeat_it(small):
    [step] = small.concepts
    assert (step.word, step.outside, step.at_home) == ("step", ("jobs/model/spec.py",), 8)
    assert small.name_repeats == ("jobs/steps/step_helpers.py",)
    assert [repeats_folder(module, folder) for module, folder in (
        ("batches", "batches"), ("batch_files", "batches"), ("lancedb_sink", "sinks"), ("stack", "devstack"),
        ("batching", "batches"))] == [True, True, True, False, False]


def test_the_walk_follows_calls_methods_constructors_properties_and_callbacks(small):
    [walk] = small.walks
    assert walk.stops == (
        "jobs/steps/flow.py:start", "engine/low.py:helper", "jobs/model/thing.py:Thing.run",
        "jobs/model/thing.py:Thing._inner", "jobs/model/thing.py:Thing.__init__", "jobs/model/thing.py:Thing.size",
        "jobs/steps/flow.py:_local")
    assert walk.files == ("jobs/steps/flow.py", "engine/low.py", "jobs/model/thing.py")
    assert walk.returns == 1  # back into flow.py for _local
    assert count_returns(["a", "b", "a", "a", "c", "b", "b"]) == 2


def test_a_walk_start_that_names_no_function_is_refused_by_name(tmp_path):
    index = SymbolIndex(read_tree(_write(tmp_path), ("engine", "jobs")))
    for start, message in (("poolq.jobs.steps.flow.start", "expected module:function"),
                           ("poolq.jobs.steps.nope:start", "no product module poolq.jobs.steps.nope"),
                           ("poolq.jobs.steps.flow:stop", "poolq.jobs.steps.flow has no function stop"),
                           ("poolq.jobs.model.thing:Thing.walk", "has no class Thing with a method walk")):
        with pytest.raises(WalkError, match=message):
            walk_calls(index, "x", start)


def test_the_json_and_markdown_carry_the_numbers(small):
    document = json.loads(as_json(small))
    assert document["sizes"]["total_lines"] == 500 and document["imports"]["upward_imports"] == 2
    text = as_markdown(small, verbose=True)
    assert "| `jobs/` | 160 | 32.0 % |  |" in text and "| `engine/` | 340 | 68.0 % | **over** |" in text
    assert "| flow | `poolq.jobs.steps.flow:start` | 7 | 3 | 1 |" in text


@pytest.fixture(scope="module")
def real():
    return build_report()


def test_the_real_tree_builds_and_its_numbers_add_up(real):
    sizes = real.sizes
    assert sum(share.lines for share in sizes.packages) == sizes.total_lines > 10_000
    assert sum(share.percent for share in sizes.packages) == pytest.approx(100, abs=0.05)
    jobs = next(share.lines for share in sizes.packages if share.name == "jobs")
    assert sum(room.lines for room in sizes.rooms) == jobs
    assert sum(folder.modules for folder in sizes.folders) + sum(1 for path in _product_files() if path.name == "__init__.py") \
        == sizes.files == len(_product_files())
    assert set(real.imports.floor_violations) == set(FLOORS)
    assert [walk.name for walk in real.walks] == ["plan_job", "run_shard", "POST /v1/embeddings"]
    for walk in real.walks:
        assert walk.stops[0].endswith((":plan_job", ":run_shard", ":create_embeddings"))
        assert len(set(walk.stops)) == len(walk.stops) > 10 and 1 < len(walk.files) <= len(walk.stops)
        assert walk.returns < len(walk.stops)


def _product_files() -> list[Path]:
    return [path for package in PACKAGES for path in (PRODUCT_ROOT / package).rglob("*.py") if "__pycache__" not in path.parts]


def test_the_command_runs_from_any_folder_as_docs_show(tmp_path):
    """docs/structure.md's example, as a reader runs it (outside the repository), well under 10 s."""
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "poolq.devtools.structure_report", "--markdown"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "### Lines per package" in run.stdout and "| POST /v1/embeddings |" in run.stdout
    assert time.monotonic() - started < 10


def test_the_command_refuses_a_bad_walk_naming_it(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--walk", "x=poolq.jobs.steps.planner:no_such_function"])
    assert exit_.value.code == 2
    assert "poolq.jobs.steps.planner has no function no_such_function" in capsys.readouterr().err
