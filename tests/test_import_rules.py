"""The layering rules, declared (and explained) in devtools/structure/import_rules.py, enforced over the tree."""
import subprocess
import sys
from pathlib import Path

import pytest

from poolq.devtools.structure.import_rules import (
    ALLOWED,
    FLOORS,
    PACKAGES,
    floor_violations,
    import_cycles,
    imports_of,
    poolq_packages,
)

ROOT = Path(__file__).resolve().parent.parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(("poolq", *parts[:-1])) if parts[-1] == "__init__" else ".".join(("poolq", *parts))


def _modules(package: str) -> dict[str, Path]:
    return {_module_name(path): path for path in (ROOT / package).rglob("*.py")}


def _edges(package: str) -> list[tuple[str, str, bool]]:
    """(importer, imported module of the same package, typing only), for modules that exist."""
    modules = _modules(package)
    edges = []
    for name, path in modules.items():
        for imported, typing_only in imports_of(path):
            if imported in modules and imported != name:
                edges.append((name, imported, typing_only))
    return edges


def _python_files() -> list[Path]:
    return [path for folder in (*PACKAGES, "tests", "infra") for path in (ROOT / folder).rglob("*.py")]


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_one_way(package):
    offenders = {
        str(path.relative_to(ROOT)): sorted(poolq_packages([name for name, _ in imports_of(path)]) - ALLOWED[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_rooms_import_only_lower_floors(package):
    assert floor_violations(FLOORS[package], _edges(package)) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_modules_import_each_other_in_a_loop(package):
    assert import_cycles(_edges(package)) == []


def test_the_rules_catch_an_upward_import_and_a_loop():
    """The checks themselves: a planted upward import and a planted loop are reported."""
    floors = (("spec",), ("steps",))
    upward = [("poolq.jobs.spec.job_spec", "poolq.jobs.steps.submit", False)]
    assert floor_violations(floors, upward) == ["poolq.jobs.spec.job_spec (floor 0) -> poolq.jobs.steps.submit (floor 1)"]
    sideways = [("poolq.jobs.steps.a", "poolq.jobs.spec.b", False), ("poolq.jobs.steps.c", "poolq.jobs.extra.d", False)]
    assert floor_violations(floors, sideways) == ["poolq.jobs.steps.c -> poolq.jobs.extra.d: room 'extra' is on no floor"]
    loop = [("a", "b", False), ("b", "c", False), ("c", "a", False), ("c", "d", True), ("d", "c", False)]
    assert import_cycles(loop) == [["a", "b", "c"]]


def test_no_bare_or_relative_imports_of_poolq_code():
    """``import engine`` would import nothing once installed; relative imports hide where a name lives."""
    offenders = {}
    for path in _python_files():
        bad = [name for name, _ in imports_of(path) if name.split(".")[0] in PACKAGES or name.startswith(".")]
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(set(bad))
    assert offenders == {}


def test_the_bare_names_import_nothing_outside_the_repository(tmp_path):
    code = ("import importlib.util as u; "
            "print([n for n in ('api', 'devtools', 'jobs', 'engine', 'storage') if u.find_spec(n)])")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_scheduler_and_request_types_do_not_import_torch():
    code = ("import sys, poolq.engine.scheduling.scheduler, poolq.engine.request, poolq.engine.batch, poolq.jobs.spec.job_spec; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_api_app_does_not_import_torch():
    code = "import sys, poolq.api.server.app, poolq.api.cli.main; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
