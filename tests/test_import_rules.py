"""The layering rules: api -> jobs -> {engine, storage}; engine and storage stand alone; every
import of poolq's own code goes through the installed namespace, ``poolq.<package>``."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("api", "jobs", "engine", "storage")
ALLOWED = {
    "api": {"api", "jobs", "engine", "storage"},
    "jobs": {"jobs", "engine", "storage"},
    "engine": {"engine"},
    "storage": {"storage"},
}


def _imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append("." * node.level + node.module)
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level)
    return names


def _poolq_packages(modules: list[str]) -> set[str]:
    """Which of poolq's packages ``modules`` reach (``poolq.jobs.steps`` -> ``jobs``)."""
    return {name.split(".")[1] for name in modules if name.startswith("poolq.") and name.count(".") >= 1}


def _python_files() -> list[Path]:
    return [path for folder in (*PACKAGES, "tests", "infra") for path in (ROOT / folder).rglob("*.py")]


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_one_way(package):
    offenders = {
        str(path.relative_to(ROOT)): sorted(_poolq_packages(_imported_modules(path)) - ALLOWED[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_bare_or_relative_imports_of_poolq_code():
    """``import engine`` would import nothing once installed; relative imports hide where a name lives."""
    offenders = {}
    for path in _python_files():
        bad = [name for name in _imported_modules(path) if name.split(".")[0] in PACKAGES or name.startswith(".")]
        if bad:
            offenders[str(path.relative_to(ROOT))] = bad
    assert offenders == {}


def test_the_bare_names_import_nothing_outside_the_repository(tmp_path):
    code = "import importlib.util as u; print([n for n in ('api', 'jobs', 'engine', 'storage') if u.find_spec(n)])"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_scheduler_and_request_types_do_not_import_torch():
    code = ("import sys, poolq.engine.scheduler, poolq.engine.request, poolq.engine.batch, poolq.jobs.job; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_api_app_does_not_import_torch():
    code = "import sys, poolq.api.server.app, poolq.api.cli.main; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
