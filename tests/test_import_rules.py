"""The layering rules: api -> jobs -> {engine, storage}; engine and storage stand alone."""
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


def _imported_packages(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_one_way(package):
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_packages(path) - ALLOWED[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_scheduler_and_request_types_do_not_import_torch():
    code = "import sys, poolq.engine.scheduler, poolq.engine.request, poolq.engine.batch, poolq.jobs.job; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_api_app_does_not_import_torch():
    code = "import sys, poolq.api.server.app, poolq.api.cli.main; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
